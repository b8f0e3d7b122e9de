/*
 * What the mlx5dv_devx_get_event man page describes, from C, against
 * rdma-core 44's mlx5dv.h: a DevX CQ on UMEMs with an EQ from
 * mlx5dv_devx_query_eqn, overrun on purpose by a DevX UD QP posting NOPs
 * (as rdma-core's tests/test_mlx5_devx_async_events.py overruns one), so
 * that the device raises a CQ error event; a data-mode channel subscribed
 * by cookie and an OMIT_EV_DATA one; the events read back with their
 * record sizes, cookies and EQE fields, the short-buffer error, EAGAIN on
 * a non-blocking fd, EOVERFLOW, an eventfd subscription, and the reads
 * after the channels' objects are destroyed.
 *
 * It prints a deterministic transcript (no ids or addresses, only their
 * relations) that must be the same over Debian's libmlx5 and over this
 * project's libmlx5.so.1 on the device model (scripts/rdma-core-on-model.sh
 * compares them byte for byte). Two steps need the model's test hooks
 * (found with dlsym in the preload shim: a lost event allocation, the
 * destruction of every DevX fd); without them (hardware) they are skipped
 * and say so.
 *
 * PRM layouts (create_cq_in/cqc, create_qp_in/qpc/ads, the QP modify
 * commands, alloc_pd) are those of mlx5_ifc.h, which mlx5dv.h does not
 * ship: the bit offsets are written here, as tests/support/src/devx_overrun.rs
 * writes them for the Rust API.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

/* The PRM bits (mlx5_ifc.h). */
enum {
	OP_CREATE_CQ = 0x400,
	OP_CREATE_QP = 0x500,
	OP_RST2INIT_QP = 0x502,
	OP_INIT2RTR_QP = 0x503,
	OP_RTR2RTS_QP = 0x504,
	OP_ALLOC_PD = 0x800,
	EVENT_CQ_ERROR = 0x04,
	EVENT_PORT_CHANGE = 0x09,
	QPC = 0xc0,
	QP_CMD_LEN = 0x880 / 8,
	LOG_NCQE = 6,
	LOG_SQ_WQEBB = 8,
	NOPS = 2 << LOG_NCQE,
};

static int failures;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			printf("FAIL line %d: ", __LINE__);                     \
			printf(__VA_ARGS__);                                   \
			printf(" (errno %s)\n", strerror(errno));              \
			failures++;                                            \
			exit(1);                                               \
		}                                                              \
	} while (0)

/* DEVX_SET: a field of `width` bits at bit `off` (big-endian words, bit 0
 * the most significant bit of the first). */
static void set(void *buf, unsigned off, unsigned width, uint64_t v)
{
	uint32_t *w = buf;

	if (width == 64) {
		set(buf, off, 32, v >> 32);
		set(buf, off + 32, 32, v & 0xffffffff);
		return;
	}
	unsigned shift = 32 - width - (off % 32);
	uint32_t mask = width == 32 ? 0xffffffff : ((1u << width) - 1) << shift;
	uint32_t old = be32toh(w[off / 32]);

	w[off / 32] = htobe32((old & ~mask) | (((uint32_t)v << shift) & mask));
}

static uint32_t get32(const void *buf, unsigned byte)
{
	uint32_t v;

	memcpy(&v, (const uint8_t *)buf + byte, 4);
	return be32toh(v);
}

static void hdr(void *buf, uint16_t opcode, uint32_t obj_id)
{
	set(buf, 0, 16, opcode);
	set(buf, 0x40, 32, obj_id);
}

static const char *err(int e)
{
	switch (e) {
	case 0: return "0";
	case EAGAIN: return "EAGAIN";
	case EINVAL: return "EINVAL";
	case EIO: return "EIO";
	case EOVERFLOW: return "EOVERFLOW";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EBADF: return "EBADF";
	default: return strerror(e);
	}
}

static void *umem_memory(size_t len)
{
	void *p = NULL;

	CHECK(posix_memalign(&p, 4096, len) == 0, "posix_memalign");
	memset(p, 0, len);
	return p;
}

/* A DevX CQ fed by a DevX UD QP in RTS, both on UMEMs. */
struct cq_qp {
	struct mlx5dv_devx_obj *cq, *qp;
	struct mlx5dv_devx_umem *cq_umem, *cq_dbr_umem, *sq_umem, *qp_dbr_umem;
	struct mlx5dv_devx_uar *uar;
	void *cq_buf, *cq_dbr, *sq, *qp_dbr;
	uint32_t cqn, qpn;
};

static struct mlx5dv_devx_umem *reg(struct ibv_context *ctx, void *p, size_t len)
{
	struct mlx5dv_devx_umem *u =
		mlx5dv_devx_umem_reg(ctx, p, len, IBV_ACCESS_LOCAL_WRITE);

	CHECK(u, "mlx5dv_devx_umem_reg");
	return u;
}

static void make_cq_qp(struct ibv_context *ctx, uint32_t pdn, uint32_t eqn,
		       struct cq_qp *r)
{
	uint8_t cmd[QP_CMD_LEN], out[16];

	memset(r, 0, sizeof(*r));
	r->cq_buf = umem_memory(64 << LOG_NCQE);
	r->cq_dbr = umem_memory(4096);
	r->sq = umem_memory(64 << LOG_SQ_WQEBB);
	r->qp_dbr = umem_memory(4096);
	r->cq_umem = reg(ctx, r->cq_buf, 64 << LOG_NCQE);
	r->cq_dbr_umem = reg(ctx, r->cq_dbr, 4096);
	r->sq_umem = reg(ctx, r->sq, 64 << LOG_SQ_WQEBB);
	r->qp_dbr_umem = reg(ctx, r->qp_dbr, 4096);
	r->uar = mlx5dv_devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC);
	CHECK(r->uar, "mlx5dv_devx_alloc_uar(NC)");

	/* create_cq_in: the CQ context at 0x80. */
	memset(cmd, 0, sizeof(cmd));
	hdr(cmd, OP_CREATE_CQ, 0);
	set(cmd, 0x80 + 0x06, 1, 1); /* dbr_umem_valid */
	set(cmd, 0x80 + 0x20, 32, r->cq_dbr_umem->umem_id);
	set(cmd, 0x80 + 0x63, 5, LOG_NCQE);
	set(cmd, 0x80 + 0x68, 24, r->uar->page_id);
	set(cmd, 0x80 + 0xb8, 8, eqn);
	set(cmd, 0x2c0, 32, r->cq_umem->umem_id);
	set(cmd, 0x2e0, 1, 1); /* cq_umem_valid */
	memset(out, 0, sizeof(out));
	r->cq = mlx5dv_devx_obj_create(ctx, cmd, 272, out, sizeof(out));
	CHECK(r->cq, "CREATE_CQ status %#x", out[0]);
	r->cqn = get32(out, 8) & 0xffffff;

	/* create_qp_in: a UD QP, send queue only. */
	memset(cmd, 0, sizeof(cmd));
	hdr(cmd, OP_CREATE_QP, 0);
	set(cmd, QPC + 0x08, 8, 0x2);   /* st: UD */
	set(cmd, QPC + 0x13, 2, 0x3);   /* pm_state: migrated */
	set(cmd, QPC + 0x28, 24, pdn);
	set(cmd, QPC + 0x51, 4, LOG_SQ_WQEBB);
	set(cmd, QPC + 0x58, 2, 0x1);   /* ts_format: default */
	set(cmd, QPC + 0x68, 24, r->uar->page_id);
	set(cmd, QPC + 0x3e8, 24, r->cqn); /* cqn_snd */
	set(cmd, QPC + 0x4e8, 24, r->cqn); /* cqn_rcv */
	set(cmd, QPC + 0x565, 3, 0x3);  /* rq_type: zero size */
	set(cmd, QPC + 0x683, 1, 1);    /* dbr_umem_valid */
	set(cmd, QPC + 0x720, 32, r->qp_dbr_umem->umem_id);
	set(cmd, 0x840, 32, r->sq_umem->umem_id); /* wq_umem_id */
	set(cmd, 0x860, 1, 1);                     /* wq_umem_valid */
	memset(out, 0, sizeof(out));
	r->qp = mlx5dv_devx_obj_create(ctx, cmd, QP_CMD_LEN, out, sizeof(out));
	CHECK(r->qp, "CREATE_QP status %#x", out[0]);
	r->qpn = get32(out, 8) & 0xffffff;

	/* RESET -> INIT (port 1, P_Key index 0, a Q_Key) -> RTR -> RTS. */
	const uint16_t ops[] = {OP_RST2INIT_QP, OP_INIT2RTR_QP, OP_RTR2RTS_QP};
	for (int i = 0; i < 3; i++) {
		memset(cmd, 0, sizeof(cmd));
		hdr(cmd, ops[i], r->qpn);
		set(cmd, QPC + 0x40, 3, 5);  /* mtu: 4096 */
		set(cmd, QPC + 0x43, 5, 12); /* log_msg_max */
		if (ops[i] == OP_RST2INIT_QP) {
			set(cmd, QPC + 0xc0 + 0x128, 8, 1); /* vhca_port_num */
			set(cmd, QPC + 0x540, 32, 0x11111111); /* q_key */
		}
		memset(out, 0, sizeof(out));
		int ret = mlx5dv_devx_obj_modify(r->qp, cmd, QP_CMD_LEN, out,
						 sizeof(out));
		CHECK(ret == 0, "QP modify %#x: %d, status %#x", ops[i], ret, out[0]);
	}
}

/* Posts NOPS NOP WQEs asking for completions and rings the doorbell: twice
 * what the CQ holds, and nothing polls it. */
static void overrun(struct cq_qp *r)
{
	uint8_t *sq = r->sq;
	uint64_t last = 0;

	for (uint32_t i = 0; i < NOPS; i++) {
		struct mlx5_wqe_ctrl_seg *c = (void *)(sq + 64 * i);

		memset(c, 0, 64);
		mlx5dv_set_ctrl_seg(c, i, MLX5_OPCODE_NOP, 0, r->qpn,
				    MLX5_WQE_CTRL_CQ_UPDATE, 1, 0, 0);
		memcpy(&last, c, 8);
	}
	__sync_synchronize();
	((volatile uint32_t *)r->qp_dbr)[MLX5_SND_DBR] = htobe32(NOPS & 0xffff);
	__sync_synchronize();
	*(volatile uint64_t *)r->uar->reg_addr = last;
	__sync_synchronize();
}

static void destroy_cq_qp(struct cq_qp *r)
{
	CHECK(mlx5dv_devx_obj_destroy(r->qp) == 0, "destroy QP");
	CHECK(mlx5dv_devx_obj_destroy(r->cq) == 0, "destroy CQ");
	CHECK(mlx5dv_devx_umem_dereg(r->qp_dbr_umem) == 0, "dereg");
	CHECK(mlx5dv_devx_umem_dereg(r->sq_umem) == 0, "dereg");
	CHECK(mlx5dv_devx_umem_dereg(r->cq_dbr_umem) == 0, "dereg");
	CHECK(mlx5dv_devx_umem_dereg(r->cq_umem) == 0, "dereg");
	mlx5dv_devx_free_uar(r->uar);
	free(r->cq_buf);
	free(r->cq_dbr);
	free(r->sq);
	free(r->qp_dbr);
}

/* Waits up to 10 s for `fd` to be readable; the revents. */
static short wait_for(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};

	/* POLLHUP comes whatever `events` asks. */

	if (poll(&p, 1, 10000) != 1)
		return 0;
	return p.revents;
}

/* One mlx5dv_devx_get_event into a buffer of `len`, printed. */
static ssize_t get(const char *what, struct mlx5dv_devx_event_channel *ch,
		   size_t len, struct mlx5dv_devx_async_event_hdr *ev)
{
	errno = 0;
	ssize_t n = mlx5dv_devx_get_event(ch, ev, len);

	if (n < 0)
		printf("%s: get_event(%zu bytes) = -1, errno %s\n", what, len,
		       err(errno));
	else
		printf("%s: get_event(%zu bytes) = %zd\n", what, len, n);
	return n;
}

static void print_eqe(const char *what,
		      const struct mlx5dv_devx_async_event_hdr *ev,
		      uint32_t cqn)
{
	const uint8_t *eqe = ev->out_data;

	printf("%s: cookie %#llx, EQE type %#04x sub-type %u, CQN %s, "
	       "syndrome %u\n",
	       what, (unsigned long long)ev->cookie, eqe[1], eqe[3],
	       (get32(eqe, 32) & 0xffffff) == cqn ? "= the CQ's" : "OTHER",
	       eqe[43]);
}

int main(void)
{
	int num;
	struct ibv_device **list = ibv_get_device_list(&num);

	CHECK(list && num > 0, "no RDMA device");
	struct mlx5dv_context_attr attr = {.flags = MLX5DV_CONTEXT_FLAGS_DEVX};
	struct ibv_context *ctx = mlx5dv_open_device(list[0], &attr);
	CHECK(ctx, "mlx5dv_open_device(DEVX)");
	ibv_free_device_list(list);
	printf("opened %s with DevX\n", ibv_get_device_name(ctx->device));

	void (*fail_allocs)(uint32_t) =
		(void (*)(uint32_t))dlsym(RTLD_DEFAULT,
					  "uverbs_model_devx_fail_event_allocs");
	void (*destroy_fds)(void) =
		(void (*)(void))dlsym(RTLD_DEFAULT, "uverbs_model_devx_destroy_fds");

	uint32_t eqn;
	CHECK(mlx5dv_devx_query_eqn(ctx, 0, &eqn) == 0, "query_eqn");
	printf("query_eqn(vector 0) = 0\n");

	/* A PD of the firmware's for the QPs: DevX ALLOC_PD. */
	uint8_t pd_in[16] = {0}, pd_out[16] = {0};
	hdr(pd_in, OP_ALLOC_PD, 0);
	struct mlx5dv_devx_obj *pd =
		mlx5dv_devx_obj_create(ctx, pd_in, sizeof(pd_in), pd_out, sizeof(pd_out));
	CHECK(pd, "ALLOC_PD");
	uint32_t pdn = get32(pd_out, 8) & 0xffffff;

	struct cq_qp a;
	make_cq_qp(ctx, pdn, eqn, &a);
	printf("DevX CQ (64 CQEs) and UD QP in RTS on UMEMs, NC UAR, EQ\n");

	struct mlx5dv_devx_event_channel *data =
		mlx5dv_devx_create_event_channel(ctx, 0);
	struct mlx5dv_devx_event_channel *omit = mlx5dv_devx_create_event_channel(
		ctx, MLX5DV_DEVX_CREATE_EVENT_CHANNEL_FLAGS_OMIT_EV_DATA);
	CHECK(data && omit, "create_event_channel");
	errno = 0;
	struct mlx5dv_devx_event_channel *bad =
		mlx5dv_devx_create_event_channel(ctx, 2);
	printf("create_event_channel(flags 0x2) = %s, errno %s\n",
	       bad ? "a channel" : "NULL", err(errno));
	if (bad)
		mlx5dv_devx_destroy_event_channel(bad);

	uint16_t cq_err = EVENT_CQ_ERROR, port = EVENT_PORT_CHANGE;
	printf("subscribe(data, CQ, CQ_ERROR, cookie 0x1111) = %d\n",
	       mlx5dv_devx_subscribe_devx_event(data, a.cq, sizeof(cq_err),
						&cq_err, 0x1111));
	printf("subscribe(omit, CQ, CQ_ERROR, cookie 0x2222) = %d\n",
	       mlx5dv_devx_subscribe_devx_event(omit, a.cq, sizeof(cq_err),
						&cq_err, 0x2222));
	printf("subscribe(data, none, PORT_CHANGE, cookie 0x3333) = %d\n",
	       mlx5dv_devx_subscribe_devx_event(data, NULL, sizeof(port),
						&port, 0x3333));
	printf("subscribe(data, CQ, PORT_CHANGE) = %s\n",
	       err(mlx5dv_devx_subscribe_devx_event(data, a.cq, sizeof(port),
						    &port, 1)));
	printf("subscribe(data, CQ, 3 bytes of types) = %s\n",
	       err(mlx5dv_devx_subscribe_devx_event(data, a.cq, 3, &cq_err, 1)));

	/* Nothing yet: the data channel non-blocking answers EAGAIN. */
	int fl = fcntl(data->fd, F_GETFL);
	CHECK(fcntl(data->fd, F_SETFL, fl | O_NONBLOCK) == 0, "O_NONBLOCK");
	union {
		struct mlx5dv_devx_async_event_hdr h;
		uint8_t bytes[128];
	} ev;
	get("data, empty, O_NONBLOCK", data, sizeof(ev), &ev.h);

	overrun(&a);
	printf("posted %d NOPs on a CQ of %d: overrun\n", NOPS, 1 << LOG_NCQE);
	short r = wait_for(data->fd);
	printf("data channel: %s\n", r & POLLIN ? "readable" : "NOT readable");
	get("data, short buffer", data, 71, &ev.h);
	if (get("data", data, sizeof(ev), &ev.h) == 72)
		print_eqe("data", &ev.h, a.cqn);
	get("data, drained", data, sizeof(ev), &ev.h);

	r = wait_for(omit->fd);
	printf("omit channel: %s\n", r & POLLIN ? "readable" : "NOT readable");
	get("omit, 7 bytes", omit, 7, &ev.h);
	if (get("omit", omit, sizeof(ev), &ev.h) == 8)
		printf("omit: cookie %#llx\n", (unsigned long long)ev.h.cookie);

	/* A second CQ: its event reaches an eventfd, and the data channel's
	 * copy is lost to a failed allocation (EOVERFLOW). */
	struct cq_qp b;
	make_cq_qp(ctx, pdn, eqn, &b);
	/* Subscribed in this order, the kernel delivers in this order
	 * (list_add_tail_rcu on the object's list): the data channel's loss
	 * is recorded by the time the eventfd counts. */
	printf("subscribe(data, CQ 2, CQ_ERROR, cookie 0x4444) = %d\n",
	       mlx5dv_devx_subscribe_devx_event(data, b.cq, sizeof(cq_err),
						&cq_err, 0x4444));
	int efd = eventfd(0, EFD_CLOEXEC);
	printf("subscribe_fd(omit, eventfd, CQ 2, CQ_ERROR) = %d\n",
	       mlx5dv_devx_subscribe_devx_event_fd(omit, efd, b.cq, cq_err));
	printf("subscribe_fd(omit, -1, CQ 2, CQ_ERROR) = %s\n",
	       err(mlx5dv_devx_subscribe_devx_event_fd(omit, -1, b.cq, cq_err)));
	int nonfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	printf("subscribe_fd(omit, not an eventfd, CQ 2, CQ_ERROR) = %s\n",
	       err(mlx5dv_devx_subscribe_devx_event_fd(omit, nonfd, b.cq, cq_err)));
	close(nonfd);
	if (fail_allocs)
		fail_allocs(1);
	overrun(&b);
	printf("CQ 2 overrun\n");
	uint64_t count = 0;
	r = wait_for(efd);
	CHECK(read(efd, &count, 8) == 8, "read eventfd");
	printf("eventfd: %llu event\n", (unsigned long long)count);
	if (fail_allocs) {
		/* A lost event wakes no one and polls not readable
		 * (devx_async_event_poll looks at the queue only). */
		struct pollfd p = {.fd = data->fd, .events = POLLIN};
		printf("data channel: %s\n",
		       poll(&p, 1, 0) == 1 ? "readable" : "not readable");
		get("data, lost event", data, sizeof(ev), &ev.h);
		get("data, after EOVERFLOW", data, sizeof(ev), &ev.h);
	} else {
		printf("(no model hook: EOVERFLOW not played)\n");
		wait_for(data->fd);
		get("data", data, sizeof(ev), &ev.h);
	}
	fl = fcntl(omit->fd, F_GETFL);
	CHECK(fcntl(omit->fd, F_SETFL, fl | O_NONBLOCK) == 0, "O_NONBLOCK");
	get("omit, nothing queued (the eventfd took it)", omit, 8, &ev.h);
	CHECK(fcntl(omit->fd, F_SETFL, fl) == 0, "blocking again");

	/* The channels' objects destroyed (the device removed): non-blocking
	 * reads EAGAIN with POLLRDHUP, blocking ones EIO. */
	if (destroy_fds) {
		destroy_fds();
		r = wait_for(data->fd);
		printf("after destroy: poll%s%s%s\n", r & POLLIN ? " POLLIN" : "",
		       r & POLLRDHUP ? " POLLRDHUP" : "",
		       r & POLLHUP ? " POLLHUP" : "");
		get("after destroy, O_NONBLOCK", data, sizeof(ev), &ev.h);
		get("after destroy, blocking", omit, sizeof(ev), &ev.h);
	} else {
		printf("(no model hook: the reads after destroy not played)\n");
	}

	close(efd);
	mlx5dv_devx_destroy_event_channel(data);
	mlx5dv_devx_destroy_event_channel(omit);
	destroy_cq_qp(&b);
	destroy_cq_qp(&a);
	CHECK(mlx5dv_devx_obj_destroy(pd) == 0, "destroy PD");
	CHECK(ibv_close_device(ctx) == 0, "close");
	printf("done\n");
	return failures != 0;
}
