/* Extended CQs (struct ibv_cq_ex) through libibverbs' C API on rxe0: what
 * ibv_create_cq_ex refuses, and RC traffic over rxe's loopback polled
 * twice, once with ibv_poll_cq and once with ibv_start_poll/next/end and
 * the ibv_wc_read_* readers, which must read the same fields.
 *
 * Built against Debian's <infiniband/verbs.h> and linked against either
 * library (see objects.c):
 *   cc -O1 -Wall -I ~/.cache/uverbs-headers-ibverbs/usr/include \
 *      -o cq_ex capi/tests/c/cq_ex.c -L $CARGO_TARGET_DIR/debug -libverbs
 * Run in the rxe guest over this crate's libibverbs.so.1 (LD_LIBRARY_PATH)
 * and over rdma-core's: both runs must print the same lines (QP numbers are
 * printed as the names qa/qb). The exit status is the number of FAIL lines.
 *
 * The receive CQ is on a completion channel: one event, acknowledged,
 * before the CQs are destroyed.
 *
 * rdma-core 44's rxe has two bugs in its session (fixed in v55 and v61):
 * after ibv_next_poll returns ENOENT, ibv_end_poll moves the consumer index
 * one past the producer, and the lock is unlocked twice. So this program
 * calls ibv_next_poll only where it knows a completion is there (the
 * receive CQ, once every send completed: rxe posts a receive's completion
 * before it sends the ACK), except once at the end on a CQ it then only
 * destroys. The send CQ is polled in sessions of one completion.
 *
 * `cq_ex --ours` adds checks only this crate's library passes (rdma-core's
 * rxe ignores start_poll's attr, spins on a second start_poll, leaves errno
 * unset for an unknown comp_mask). */

#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#define GID_INDEX 1
#define SLOT 256
#define MAX_WC 16

static int failures;
static uint32_t qpn_a, qpn_b;

static void check(int ok, const char *what)
{
	printf("%s %s\n", ok ? "PASS" : "FAIL", what);
	if (!ok)
		failures++;
}

static const char *qp_name(uint32_t n, char *tmp)
{
	if (n == qpn_a)
		return "qa";
	if (n == qpn_b)
		return "qb";
	snprintf(tmp, 16, "%u", n);
	return tmp;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* One completion's fields as a line; `flags` says which the CQ reports. */
static void describe(char *line, size_t len, uint64_t flags, uint64_t wr_id, int status,
		     int opcode, uint32_t vendor_err, uint32_t byte_len, uint32_t imm,
		     uint32_t qp_num, uint32_t src_qp, unsigned int wc_flags, uint32_t slid,
		     uint8_t sl, uint8_t path_bits)
{
	char a[16], b[16];
	int n;

	n = snprintf(line, len, "wr_id %llu status %s opcode %d vendor_err %u wc_flags %#x",
		     (unsigned long long)wr_id, ibv_wc_status_str(status), opcode, vendor_err,
		     wc_flags);
	if (flags & IBV_WC_EX_WITH_BYTE_LEN)
		n += snprintf(line + n, len - n, " byte_len %u", byte_len);
	if ((flags & IBV_WC_EX_WITH_IMM) && (wc_flags & IBV_WC_WITH_IMM))
		n += snprintf(line + n, len - n, " imm %#x", ntohl(imm));
	if (flags & IBV_WC_EX_WITH_QP_NUM)
		n += snprintf(line + n, len - n, " qp %s", qp_name(qp_num, a));
	if (flags & IBV_WC_EX_WITH_SRC_QP)
		n += snprintf(line + n, len - n, " src_qp %s", qp_name(src_qp, b));
	if (flags & IBV_WC_EX_WITH_SLID)
		n += snprintf(line + n, len - n, " slid %u", slid);
	if (flags & IBV_WC_EX_WITH_SL)
		n += snprintf(line + n, len - n, " sl %u", sl);
	if (flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		snprintf(line + n, len - n, " dlid_path_bits %u", path_bits);
}

static void describe_wc(char *line, size_t len, uint64_t flags, const struct ibv_wc *w)
{
	describe(line, len, flags, w->wr_id, w->status, w->opcode, w->vendor_err, w->byte_len,
		 w->imm_data, w->qp_num, w->src_qp, w->wc_flags, w->slid, w->sl,
		 w->dlid_path_bits);
}

/* The session's current completion, read with the readers of `flags`. */
static void describe_ex(char *line, size_t len, uint64_t flags, struct ibv_cq_ex *cq)
{
	describe(line, len, flags, cq->wr_id, cq->status, ibv_wc_read_opcode(cq),
		 ibv_wc_read_vendor_err(cq),
		 flags & IBV_WC_EX_WITH_BYTE_LEN ? ibv_wc_read_byte_len(cq) : 0,
		 flags & IBV_WC_EX_WITH_IMM ? ibv_wc_read_imm_data(cq) : 0,
		 flags & IBV_WC_EX_WITH_QP_NUM ? ibv_wc_read_qp_num(cq) : 0,
		 flags & IBV_WC_EX_WITH_SRC_QP ? ibv_wc_read_src_qp(cq) : 0,
		 ibv_wc_read_wc_flags(cq), flags & IBV_WC_EX_WITH_SLID ? ibv_wc_read_slid(cq) : 0,
		 flags & IBV_WC_EX_WITH_SL ? ibv_wc_read_sl(cq) : 0,
		 flags & IBV_WC_EX_WITH_DLID_PATH_BITS ? ibv_wc_read_dlid_path_bits(cq) : 0);
}

/* `n` completions with ibv_poll_cq. */
static int poll_n(struct ibv_cq_ex *cq, uint64_t flags, int n, char lines[][200])
{
	double deadline = now() + 10;
	struct ibv_wc wc;
	int got = 0, rc;

	while (got < n && now() < deadline) {
		rc = ibv_poll_cq(ibv_cq_ex_to_cq(cq), 1, &wc);
		if (rc < 0)
			break;
		if (rc == 1)
			describe_wc(lines[got++], 200, flags, &wc);
	}
	return got;
}

/* ibv_start_poll until a completion comes (ENOENT leaves no session). */
static int start_waiting(struct ibv_cq_ex *cq)
{
	struct ibv_poll_cq_attr attr = { .comp_mask = 0 };
	double deadline = now() + 10;
	int rc;

	do
		rc = ibv_start_poll(cq, &attr);
	while (rc == ENOENT && now() < deadline);
	return rc;
}

/* `n` completions in sessions of one (safe on rdma-core 44's rxe). */
static int session_singles(struct ibv_cq_ex *cq, uint64_t flags, int n, char lines[][200])
{
	int got;

	for (got = 0; got < n; got++) {
		if (start_waiting(cq))
			break;
		describe_ex(lines[got], 200, flags, cq);
		ibv_end_poll(cq);
	}
	return got;
}

/* `n` completions known to be in the CQ, in one session. */
static int session_of(struct ibv_cq_ex *cq, uint64_t flags, int n, char lines[][200])
{
	int got = 0;

	if (start_waiting(cq))
		return 0;
	for (;;) {
		describe_ex(lines[got++], 200, flags, cq);
		if (got == n || ibv_next_poll(cq))
			break;
	}
	ibv_end_poll(cq);
	return got;
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ,
	};

	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int to_rts(struct ibv_qp *qp, uint32_t dest, const union ibv_gid *gid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = dest,
		.rq_psn = 0,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1,
			.grh = { .dgid = *gid, .sgid_index = GID_INDEX, .hop_limit = 1 },
			.port_num = 1,
		},
	};
	int rc;

	rc = ibv_modify_qp(qp, &a,
			   IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				   IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return rc;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

struct rig {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	char *buf;
	struct ibv_comp_channel *ch;
	struct ibv_cq_ex *scq, *rcq;
	struct ibv_qp *qa, *qb;
};

#define SEND_FLAGS (IBV_WC_STANDARD_FLAGS)
#define RECV_FLAGS                                                                         \
	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |            \
	 IBV_WC_EX_WITH_SRC_QP)

static int post_recv(struct rig *r, uint64_t wr_id, int slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)r->buf + 16 * SLOT + slot * SLOT,
		.length = SLOT,
		.lkey = r->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(r->qb, &wr, &bad);
}

static int post_send(struct rig *r, uint64_t wr_id, enum ibv_wr_opcode op, uint32_t len,
		     uint32_t imm, uint32_t lkey)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)r->buf + (wr_id % 16) * SLOT,
		.length = len,
		.lkey = lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = len ? 1 : 0,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.imm_data = htonl(imm),
	}, *bad;

	wr.wr.rdma.remote_addr = (uintptr_t)r->buf + 32 * SLOT;
	wr.wr.rdma.rkey = r->mr->rkey;
	return ibv_post_send(r->qa, &wr, &bad);
}

/* One round of traffic qa -> qb: 6 send completions, 4 receive ones. */
static int traffic(struct rig *r)
{
	int rc = 0, i;

	for (i = 0; i < 4; i++)
		rc |= post_recv(r, 100 + i, i);
	rc |= post_send(r, 1, IBV_WR_SEND, 16, 0, r->mr->lkey);
	rc |= post_send(r, 2, IBV_WR_SEND_WITH_IMM, 32, 0x12345678, r->mr->lkey);
	rc |= post_send(r, 3, IBV_WR_RDMA_WRITE, 64, 0, r->mr->lkey);
	rc |= post_send(r, 4, IBV_WR_RDMA_WRITE_WITH_IMM, 48, 0xcafe, r->mr->lkey);
	rc |= post_send(r, 5, IBV_WR_RDMA_READ, 128, 0, r->mr->lkey);
	rc |= post_send(r, 6, IBV_WR_SEND, 0, 0, r->mr->lkey);
	return rc;
}

static void rounds(struct rig *r)
{
	static char polled[2][MAX_WC][200], read[2][MAX_WC][200];
	int ns, nr, i;

	check(traffic(r) == 0, "post round 1");
	ns = poll_n(r->scq, SEND_FLAGS, 6, polled[0]);
	nr = poll_n(r->rcq, RECV_FLAGS, 4, polled[1]);
	check(ns == 6 && nr == 4, "ibv_poll_cq: 6 send and 4 receive completions");
	for (i = 0; i < ns; i++)
		printf("  poll_cq send: %s\n", polled[0][i]);
	for (i = 0; i < nr; i++)
		printf("  poll_cq recv: %s\n", polled[1][i]);

	check(traffic(r) == 0, "post round 2");
	ns = session_singles(r->scq, SEND_FLAGS, 6, read[0]);
	nr = session_of(r->rcq, RECV_FLAGS, 4, read[1]);
	check(ns == 6 && nr == 4, "start/next/end_poll: 6 send and 4 receive completions");
	for (i = 0; i < ns; i++) {
		printf("  cq_ex send: %s\n", read[0][i]);
		check(!strcmp(read[0][i], polled[0][i]), "send completion reads as ibv_poll_cq's");
	}
	for (i = 0; i < nr; i++) {
		printf("  cq_ex recv: %s\n", read[1][i]);
		check(!strcmp(read[1][i], polled[1][i]), "receive completion reads as ibv_poll_cq's");
	}
}

static struct ibv_cq_ex *cq_ex(struct ibv_context *ctx, uint64_t wc_flags, uint32_t comp_mask,
			       uint32_t flags, int cqe)
{
	struct ibv_cq_init_attr_ex a = {
		.cqe = cqe,
		.wc_flags = wc_flags,
		.comp_mask = comp_mask,
		.flags = flags,
	};

	errno = 0;
	return ibv_create_cq_ex(ctx, &a);
}

static void refused(struct ibv_context *ctx, uint64_t wc_flags, uint32_t comp_mask,
		    uint32_t flags, int cqe, int want, const char *what)
{
	struct ibv_cq_ex *cq = cq_ex(ctx, wc_flags, comp_mask, flags, cqe);
	char line[200];
	int got = errno;

	snprintf(line, sizeof(line), "create_cq_ex %s -> NULL%s%s", what, want ? ", " : "",
		 want ? strerror(want) : "");
	if (cq) {
		printf("  (succeeded)\n");
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	} else if (want && got != want) {
		printf("  (errno %d %s)\n", got, strerror(got));
	}
	check(!cq && (!want || got == want), line);
}

static void creation(struct ibv_context *ctx, int ours)
{
	struct ibv_device_attr attr;
	struct ibv_cq_ex *cq;

	check(ibv_query_device(ctx, &attr) == 0, "query_device");
	refused(ctx, IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, 0, 0, 8, EOPNOTSUPP,
		"with COMPLETION_TIMESTAMP");
	refused(ctx, IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK, 0, 0, 8, EOPNOTSUPP,
		"with COMPLETION_TIMESTAMP_WALLCLOCK");
	refused(ctx, IBV_WC_EX_WITH_CVLAN, 0, 0, 8, EOPNOTSUPP, "with CVLAN");
	refused(ctx, IBV_WC_EX_WITH_FLOW_TAG, 0, 0, 8, EOPNOTSUPP, "with FLOW_TAG");
	refused(ctx, IBV_WC_EX_WITH_TM_INFO, 0, 0, 8, EOPNOTSUPP, "with TM_INFO");
	refused(ctx, 1ULL << 20, 0, 0, 8, EOPNOTSUPP, "with an undefined wc_flags bit");
	refused(ctx, IBV_WC_STANDARD_FLAGS, IBV_CQ_INIT_ATTR_MASK_FLAGS,
		IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN, 8, EOPNOTSUPP, "with IGNORE_OVERRUN");
	refused(ctx, IBV_WC_STANDARD_FLAGS, 1 << 5, 0, 8, ours ? EOPNOTSUPP : 0,
		"with an unknown comp_mask bit");
	refused(ctx, IBV_WC_STANDARD_FLAGS, 0, 0, attr.max_cqe + 1, EINVAL, "above max_cqe");
	{
		struct ibv_cq_init_attr_ex a = { .cqe = 8, .comp_vector = ctx->num_comp_vectors };

		errno = 0;
		cq = ibv_create_cq_ex(ctx, &a);
		check(!cq && errno == EINVAL,
		      "create_cq_ex on a vector the device lacks -> NULL, Invalid argument");
	}

	cq = cq_ex(ctx, IBV_WC_STANDARD_FLAGS, IBV_CQ_INIT_ATTR_MASK_FLAGS,
		   IBV_CREATE_CQ_ATTR_SINGLE_THREADED, 8);
	check(cq != NULL, "create_cq_ex SINGLE_THREADED");
	if (cq)
		check(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)) == 0, "destroy_cq of a cq_ex");
	cq = cq_ex(ctx, 0, 0, 0, 8);
	check(cq != NULL, "create_cq_ex with no wc_flags");
	if (cq)
		check(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)) == 0, "destroy_cq of a cq_ex");
}

/* Checks rdma-core's rxe does not pass (see the file's comment). */
static void ours_only(struct rig *r)
{
	struct ibv_poll_cq_attr masked = { .comp_mask = 1 }, none = { 0 };
	static char line[1][200];
	struct ibv_cq *plain;

	check(ibv_start_poll(r->rcq, &masked) == EINVAL, "start_poll with a comp_mask -> EINVAL");
	check(ibv_next_poll(r->rcq) == EINVAL, "next_poll outside a session -> EINVAL");
	check(post_recv(r, 110, 0) == 0 && post_send(r, 10, IBV_WR_SEND, 8, 0, r->mr->lkey) == 0,
	      "post a SEND");
	check(session_singles(r->scq, 0, 1, line) == 1,
	      "its send completion");
	check(start_waiting(r->rcq) == 0 && r->rcq->wr_id == 110, "start_poll: the receive");
	check(ibv_start_poll(r->rcq, &none) == EDEADLK,
	      "a second start_poll in the session -> EDEADLK");
	ibv_end_poll(r->rcq);
	plain = ibv_create_cq(r->ctx, 4, NULL, NULL, 0);
	check(plain && ((struct ibv_cq_ex *)plain)->start_poll &&
		      ((struct ibv_cq_ex *)plain)->read_completion_wallclock_ns,
	      "ibv_create_cq's CQ has the cq_ex ops too");
	if (plain)
		ibv_destroy_cq(plain);
}

/* A failed send and the one it flushes (qa goes to the error state). */
static void errors(struct rig *r)
{
	static char lines[2][200];
	int n, i;

	check(post_send(r, 7, IBV_WR_SEND, 8, 0, r->mr->lkey + 4096) == 0 &&
		      post_send(r, 8, IBV_WR_SEND, 8, 0, r->mr->lkey) == 0,
	      "post a SEND with a bad lkey and one after it");
	n = session_singles(r->scq, IBV_WC_EX_WITH_QP_NUM, 2, lines);
	check(n == 2, "two error completions");
	for (i = 0; i < n; i++)
		printf("  cq_ex error: %s\n", lines[i]);
}

int main(int argc, char **argv)
{
	int ours = argc > 1 && !strcmp(argv[1], "--ours");
	struct ibv_poll_cq_attr attr = { 0 };
	struct ibv_device **list;
	struct rig r = { 0 };
	static char line[1][200];
	union ibv_gid gid;
	int num, i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	list = ibv_get_device_list(&num);
	for (i = 0; list && i < num; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "rxe0"))
			r.ctx = ibv_open_device(list[i]);
	check(r.ctx != NULL, "open rxe0");
	if (!r.ctx)
		return 1;
	creation(r.ctx, ours);

	r.buf = aligned_alloc(4096, 64 * SLOT);
	memset(r.buf, 0x5a, 64 * SLOT);
	r.pd = ibv_alloc_pd(r.ctx);
	r.mr = r.pd ? ibv_reg_mr(r.pd, r.buf, 64 * SLOT,
				 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					 IBV_ACCESS_REMOTE_READ)
		    : NULL;
	r.ch = ibv_create_comp_channel(r.ctx);
	r.scq = cq_ex(r.ctx, SEND_FLAGS, 0, 0, 32);
	{
		struct ibv_cq_init_attr_ex a = {
			.cqe = 32,
			.cq_context = &r,
			.channel = r.ch,
			.comp_vector = r.ctx->num_comp_vectors - 1,
			.wc_flags = RECV_FLAGS,
		};

		r.rcq = r.ch ? ibv_create_cq_ex(r.ctx, &a) : NULL;
	}
	check(r.mr && r.scq && r.rcq, "PD, MR and two extended CQs, one on a channel");
	if (!r.mr || !r.scq || !r.rcq)
		return 1;
	check(r.scq->start_poll && r.scq->read_slid && r.rcq->read_src_qp && r.rcq->read_imm_data,
	      "the ops of the fields asked for");
	check(ibv_start_poll(r.rcq, &attr) == ENOENT, "start_poll on an empty CQ -> ENOENT");

	{
		struct ibv_qp_init_attr ia = {
			.send_cq = ibv_cq_ex_to_cq(r.scq),
			.recv_cq = ibv_cq_ex_to_cq(r.rcq),
			.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
				 .max_recv_sge = 1 },
			.qp_type = IBV_QPT_RC,
		};

		r.qa = ibv_create_qp(r.pd, &ia);
		r.qb = ibv_create_qp(r.pd, &ia);
	}
	check(r.qa && r.qb, "two RC QPs on the extended CQs");
	if (!r.qa || !r.qb)
		return 1;
	qpn_a = r.qa->qp_num;
	qpn_b = r.qb->qp_num;
	check(ibv_query_gid(r.ctx, 1, GID_INDEX, &gid) == 0, "query_gid");
	check(!to_init(r.qa) && !to_init(r.qb) && !to_rts(r.qa, qpn_b, &gid) &&
		      !to_rts(r.qb, qpn_a, &gid),
	      "connect qa and qb (INIT, RTR, RTS)");

	rounds(&r);
	if (ours)
		ours_only(&r);

	/* An event, then next_poll's ENOENT, last on this CQ (see the file's
	 * comment). */
	check(ibv_req_notify_cq(ibv_cq_ex_to_cq(r.rcq), 0) == 0, "req_notify_cq on a cq_ex");
	check(post_recv(&r, 120, 0) == 0 &&
		      post_send(&r, 9, IBV_WR_SEND_WITH_IMM, 24, 0xfeed, r.mr->lkey) == 0,
	      "post a SEND_WITH_IMM");
	check(session_singles(r.scq, 0, 1, line) == 1, "its send completion");
	{
		struct ibv_cq *ev_cq = NULL;
		void *ev_ctx = NULL;

		check(ibv_get_cq_event(r.ch, &ev_cq, &ev_ctx) == 0 &&
			      ev_cq == ibv_cq_ex_to_cq(r.rcq) && ev_ctx == &r,
		      "get_cq_event: the cq_ex and its cq_context");
		if (ev_cq)
			ibv_ack_cq_events(ev_cq, 1);
	}
	check(start_waiting(r.rcq) == 0 && r.rcq->wr_id == 120 &&
		      r.rcq->status == IBV_WC_SUCCESS &&
		      ntohl(ibv_wc_read_imm_data(r.rcq)) == 0xfeed &&
		      ibv_wc_read_byte_len(r.rcq) == 24 && ibv_wc_read_qp_num(r.rcq) == qpn_b,
	      "start_poll: the receive, its immediate data and length");
	check(ibv_next_poll(r.rcq) == ENOENT, "next_poll on the last completion -> ENOENT");
	ibv_end_poll(r.rcq);
	if (ours)
		check(ibv_start_poll(r.rcq, &attr) == ENOENT, "then start_poll -> ENOENT");

	errors(&r);

	check(ibv_destroy_qp(r.qa) == 0 && ibv_destroy_qp(r.qb) == 0, "destroy the QPs");
	check(ibv_destroy_cq(ibv_cq_ex_to_cq(r.scq)) == 0 &&
		      ibv_destroy_cq(ibv_cq_ex_to_cq(r.rcq)) == 0,
	      "destroy the extended CQs");
	check(ibv_destroy_comp_channel(r.ch) == 0, "destroy_comp_channel");
	check(ibv_dereg_mr(r.mr) == 0 && ibv_dealloc_pd(r.pd) == 0, "dereg_mr, dealloc_pd");
	check(ibv_close_device(r.ctx) == 0, "close_device");
	ibv_free_device_list(list);
	free(r.buf);
	printf("%d failures\n", failures);
	return failures;
}
