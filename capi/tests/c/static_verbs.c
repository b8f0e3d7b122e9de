/* static_verbs: what rdma-core's pingpongs and perftest ask of libibverbs,
 * in one process on one device, written against Debian's verbs.h (rdma-core
 * 44): the device list, open and queries; a PD and MRs; CQs, one with a
 * completion channel (armed, its event read and acknowledged); RC QPs
 * connected to each other through the device's loopback (SEND/RECV,
 * RDMA WRITE, RDMA READ, and a receive through an SRQ); a UD QP sending to
 * itself through an address handle; then every object destroyed.
 *
 * Built three ways by capi/build-static.sh: a fully static musl binary over
 * the uverbs-cabi staticlib (no libibverbs anywhere), and dynamically against
 * Debian's libibverbs.so, run over real rdma-core and over ours
 * (LD_LIBRARY_PATH). The device tests (tests/device/cabi.rs) run all three
 * in the rxe guest.
 *
 * Usage: static_verbs [-d DEVICE] [-g GID_INDEX] [-p PORT]
 *   defaults: $UVERBS_TEST_DEVICE (else the first device),
 *   $UVERBS_TEST_GID_INDEX (else 0), port 1.
 * Prints "PASS <step>" per step, "FAIL <step>: <why>" and exits 1 at the
 * first failure; exits 0 after "PASS all".
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define DEPTH 16
#define BUF 16384
#define GRH 40
#define QKEY 0x11111111u
#define TIMEOUT_MS 20000

static const char *step = "setup";

static void fail(const char *fmt, ...)
{
	va_list ap;
	printf("FAIL %s: ", step);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(1);
}

#define CHECK(cond, ...) do { if (!(cond)) fail(__VA_ARGS__); } while (0)

static void pass(void)
{
	printf("PASS %s\n", step);
	fflush(stdout);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint8_t port;
	int gidx;
	union ibv_gid gid;
	struct ibv_port_attr pattr;
};

/* Polls `cq` until one completion arrives (bounded); fails unless it is a
 * success of `opcode`. */
static struct ibv_wc poll_one(struct ibv_cq *cq, enum ibv_wc_opcode opcode)
{
	struct ibv_wc wc;
	int64_t end = now_ms() + TIMEOUT_MS;
	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);
		CHECK(n >= 0, "ibv_poll_cq returned %d", n);
		if (n == 1)
			break;
		CHECK(now_ms() < end, "no completion after %d ms", TIMEOUT_MS);
	}
	CHECK(wc.status == IBV_WC_SUCCESS, "completion status %s (%d), wr_id %llu",
	      ibv_wc_status_str(wc.status), wc.status, (unsigned long long)wc.wr_id);
	CHECK(wc.opcode == opcode, "opcode %d, expected %d", wc.opcode, opcode);
	return wc;
}

static struct ibv_qp *create_qp(struct dev *d, enum ibv_qp_type type, struct ibv_cq *scq,
				struct ibv_cq *rcq, struct ibv_srq *srq, void *qp_context)
{
	struct ibv_qp_init_attr ia = {
		.qp_context = qp_context,
		.send_cq = scq,
		.recv_cq = rcq,
		.srq = srq,
		.cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = type,
		.sq_sig_all = 0,
	};
	struct ibv_qp *qp = ibv_create_qp(d->pd, &ia);
	CHECK(qp, "ibv_create_qp(%d): %s", type, strerror(errno));
	CHECK(qp->qp_type == type && qp->qp_num != 0 && qp->qp_context == qp_context &&
	      qp->send_cq == scq && qp->recv_cq == rcq && qp->srq == srq && qp->pd == d->pd,
	      "the created QP's fields");
	CHECK(ia.cap.max_send_wr >= DEPTH && ia.cap.max_recv_wr >= (srq ? 0 : DEPTH),
	      "ibv_create_qp reported caps %u/%u", ia.cap.max_send_wr, ia.cap.max_recv_wr);
	return qp;
}

static void modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, const char *to)
{
	int r = ibv_modify_qp(qp, a, mask);
	CHECK(r == 0, "ibv_modify_qp to %s: %s", to, strerror(r));
}

static void ah_to_self(struct dev *d, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof *ah);
	ah->is_global = 1;
	ah->grh.dgid = d->gid;
	ah->grh.sgid_index = d->gidx;
	ah->grh.hop_limit = 1;
	ah->port_num = d->port;
}

/* INIT -> RTR -> RTS towards `remote_qpn` on this device (RC). */
static void connect_rc(struct dev *d, struct ibv_qp *qp, uint32_t remote_qpn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = d->port,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ,
	};
	modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = d->pattr.active_mtu;
	a.dest_qp_num = remote_qpn;
	a.rq_psn = 0x1234;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	ah_to_self(d, &a.ah_attr);
	modify(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER, "RTR");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0x1234;
	a.max_rd_atomic = 1;
	modify(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC, "RTS");
}

static void post_recv(struct ibv_qp *qp, struct ibv_srq *srq, struct ibv_mr *mr, void *addr,
		      uint32_t len, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;
	int r = srq ? ibv_post_srq_recv(srq, &wr, &bad) : ibv_post_recv(qp, &wr, &bad);
	CHECK(r == 0 && bad == NULL, "post recv: %s", strerror(r));
}

static void post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_mr *mr, void *addr,
		      uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = mr->lkey };
	struct ibv_send_wr *bad = NULL;
	wr->sg_list = &sge;
	wr->num_sge = 1;
	wr->send_flags |= IBV_SEND_SIGNALED;
	int r = ibv_post_send(qp, wr, &bad);
	CHECK(r == 0 && bad == NULL, "ibv_post_send: %s", strerror(r));
}

static void fill(char *p, size_t n, const char *tag)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (char)(tag[i % strlen(tag)] + (char)(i / strlen(tag)));
}

static void open_device(struct dev *d, const char *want)
{
	step = "device list, open, query";
	int num = -1;
	struct ibv_device **list = ibv_get_device_list(&num);
	CHECK(list && num > 0, "ibv_get_device_list: %d devices (%s)", num, strerror(errno));
	struct ibv_device *dev = NULL;
	for (int i = 0; i < num; i++)
		if (!want || strcmp(ibv_get_device_name(list[i]), want) == 0)
			dev = dev ? dev : list[i];
	CHECK(list[num] == NULL, "the list is not NULL-terminated");
	CHECK(dev, "no device %s among %d", want ? want : "(any)", num);
	printf("device %s, node GUID %016llx\n", ibv_get_device_name(dev),
	       (unsigned long long)be64toh(ibv_get_device_guid(dev)));
	d->ctx = ibv_open_device(dev);
	CHECK(d->ctx, "ibv_open_device: %s", strerror(errno));
	CHECK(d->ctx->device == dev, "context->device is not the device opened");
	ibv_free_device_list(list);

	struct ibv_device_attr da;
	int r = ibv_query_device(d->ctx, &da);
	CHECK(r == 0, "ibv_query_device: %s", strerror(r));
	CHECK(da.phys_port_cnt >= d->port && da.max_qp > 0 && da.max_cqe >= 2 * DEPTH &&
	      da.max_qp_wr >= DEPTH, "device attributes (ports %u, max_qp %d, max_cqe %d)",
	      da.phys_port_cnt, da.max_qp, da.max_cqe);
	r = ibv_query_port(d->ctx, d->port, &d->pattr);
	CHECK(r == 0, "ibv_query_port: %s", strerror(r));
	CHECK(d->pattr.state == IBV_PORT_ACTIVE, "port %u state %d", d->port, d->pattr.state);
	CHECK(d->pattr.gid_tbl_len > d->gidx, "GID table of %d", d->pattr.gid_tbl_len);
	r = ibv_query_gid(d->ctx, d->port, d->gidx, &d->gid);
	CHECK(r == 0, "ibv_query_gid: %s", strerror(errno));
	CHECK(d->gid.global.subnet_prefix || d->gid.global.interface_id, "GID %d is zero", d->gidx);
	printf("port %u: active_mtu %d, GID[%d] %016llx:%016llx\n", d->port, d->pattr.active_mtu,
	       d->gidx, (unsigned long long)be64toh(d->gid.global.subnet_prefix),
	       (unsigned long long)be64toh(d->gid.global.interface_id));
	pass();
}

int main(int argc, char **argv)
{
	struct dev d = { .port = 1 };
	const char *want = getenv("UVERBS_TEST_DEVICE");
	const char *g = getenv("UVERBS_TEST_GID_INDEX");
	d.gidx = g ? atoi(g) : 0;
	int opt;
	while ((opt = getopt(argc, argv, "d:g:p:")) != -1) {
		switch (opt) {
		case 'd': want = optarg; break;
		case 'g': d.gidx = atoi(optarg); break;
		case 'p': d.port = (uint8_t)atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-d DEVICE] [-g GID_INDEX] [-p PORT]\n", argv[0]);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	open_device(&d, want);

	step = "PD, MRs";
	d.pd = ibv_alloc_pd(d.ctx);
	CHECK(d.pd && d.pd->context == d.ctx, "ibv_alloc_pd: %s", strerror(errno));
	char *a = aligned_alloc(4096, BUF), *b = aligned_alloc(4096, BUF);
	CHECK(a && b, "out of memory");
	memset(a, 0, BUF);
	memset(b, 0, BUF);
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_mr *ma = ibv_reg_mr(d.pd, a, BUF, acc), *mb = ibv_reg_mr(d.pd, b, BUF, acc);
	CHECK(ma && mb, "ibv_reg_mr: %s", strerror(errno));
	CHECK(ma->addr == a && ma->length == BUF && ma->pd == d.pd && ma->context == d.ctx &&
	      mb->lkey != ma->lkey, "the MRs' fields");
	pass();

	step = "CQs, completion channel";
	struct ibv_comp_channel *ch = ibv_create_comp_channel(d.ctx);
	CHECK(ch && ch->fd >= 0 && ch->context == d.ctx, "ibv_create_comp_channel: %s",
	      strerror(errno));
	static int rcq_tag;
	struct ibv_cq *scq = ibv_create_cq(d.ctx, 4 * DEPTH, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(d.ctx, 4 * DEPTH, &rcq_tag, ch, 0);
	struct ibv_cq *ucq = ibv_create_cq(d.ctx, 4 * DEPTH, NULL, NULL, 0);
	CHECK(scq && rcq && ucq, "ibv_create_cq: %s", strerror(errno));
	CHECK(rcq->cq_context == &rcq_tag && rcq->channel == ch && rcq->cqe >= 4 * DEPTH &&
	      rcq->context == d.ctx, "the CQ's fields");
	pass();

	step = "RC QPs to RTS";
	static int qa_tag, qb_tag;
	struct ibv_qp *qa = create_qp(&d, IBV_QPT_RC, scq, scq, NULL, &qa_tag);
	struct ibv_qp *qb = create_qp(&d, IBV_QPT_RC, scq, rcq, NULL, &qb_tag);
	connect_rc(&d, qa, qb->qp_num);
	connect_rc(&d, qb, qa->qp_num);
	struct ibv_qp_attr qattr;
	struct ibv_qp_init_attr qinit;
	int r = ibv_query_qp(qa, &qattr, IBV_QP_STATE | IBV_QP_CAP | IBV_QP_DEST_QPN, &qinit);
	CHECK(r == 0, "ibv_query_qp: %s", strerror(r));
	CHECK(qattr.qp_state == IBV_QPS_RTS && qattr.dest_qp_num == qb->qp_num &&
	      qinit.cap.max_send_wr >= DEPTH, "queried state %d, dest %u", qattr.qp_state,
	      qattr.dest_qp_num);
	CHECK(qa->state == IBV_QPS_RTS, "qp->state %d", qa->state);
	pass();

	step = "RC SEND/RECV with a completion event";
	r = ibv_req_notify_cq(rcq, 0);
	CHECK(r == 0, "ibv_req_notify_cq: %s", strerror(r));
	post_recv(qb, NULL, mb, b, 256, 7);
	fill(a, 200, "rc-send");
	struct ibv_send_wr wr = { .wr_id = 1, .opcode = IBV_WR_SEND };
	post_send(qa, &wr, ma, a, 200);
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	CHECK(poll(&pfd, 1, TIMEOUT_MS) == 1, "no completion event within %d ms", TIMEOUT_MS);
	struct ibv_cq *ev_cq = NULL;
	void *ev_ctx = NULL;
	CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0, "ibv_get_cq_event: %s", strerror(errno));
	CHECK(ev_cq == rcq && ev_ctx == &rcq_tag, "the event names another CQ");
	ibv_ack_cq_events(ev_cq, 1);
	r = ibv_req_notify_cq(rcq, 0);
	CHECK(r == 0, "ibv_req_notify_cq again: %s", strerror(r));
	struct ibv_wc wc = poll_one(rcq, IBV_WC_RECV);
	CHECK(wc.wr_id == 7 && wc.byte_len == 200 && wc.qp_num == qb->qp_num,
	      "recv wr_id %llu, byte_len %u, qp_num %u", (unsigned long long)wc.wr_id, wc.byte_len,
	      wc.qp_num);
	wc = poll_one(scq, IBV_WC_SEND);
	CHECK(wc.wr_id == 1 && wc.qp_num == qa->qp_num, "send completion wr_id %llu",
	      (unsigned long long)wc.wr_id);
	CHECK(memcmp(a, b, 200) == 0, "received bytes differ");
	pass();

	step = "RC RDMA WRITE";
	fill(a + 4096, 3000, "rdma-write");
	wr = (struct ibv_send_wr){ .wr_id = 2, .opcode = IBV_WR_RDMA_WRITE };
	wr.wr.rdma.remote_addr = (uintptr_t)(b + 4096);
	wr.wr.rdma.rkey = mb->rkey;
	post_send(qa, &wr, ma, a + 4096, 3000);
	wc = poll_one(scq, IBV_WC_RDMA_WRITE);
	CHECK(wc.wr_id == 2, "wr_id %llu", (unsigned long long)wc.wr_id);
	CHECK(memcmp(a + 4096, b + 4096, 3000) == 0, "written bytes differ");
	pass();

	step = "RC RDMA READ";
	fill(b + 8192, 2048, "rdma-read");
	wr = (struct ibv_send_wr){ .wr_id = 3, .opcode = IBV_WR_RDMA_READ };
	wr.wr.rdma.remote_addr = (uintptr_t)(b + 8192);
	wr.wr.rdma.rkey = mb->rkey;
	post_send(qa, &wr, ma, a + 8192, 2048);
	wc = poll_one(scq, IBV_WC_RDMA_READ);
	CHECK(wc.wr_id == 3 && wc.byte_len == 2048, "wr_id %llu byte_len %u",
	      (unsigned long long)wc.wr_id, wc.byte_len);
	CHECK(memcmp(a + 8192, b + 8192, 2048) == 0, "read bytes differ");
	pass();

	step = "SRQ receive";
	struct ibv_srq_init_attr sia = { .attr = { .max_wr = DEPTH, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(d.pd, &sia);
	CHECK(srq && srq->pd == d.pd, "ibv_create_srq: %s", strerror(errno));
	struct ibv_qp *qc = create_qp(&d, IBV_QPT_RC, scq, scq, NULL, NULL);
	struct ibv_qp *qd = create_qp(&d, IBV_QPT_RC, scq, rcq, srq, NULL);
	connect_rc(&d, qc, qd->qp_num);
	connect_rc(&d, qd, qc->qp_num);
	post_recv(NULL, srq, mb, b + 12288, 512, 8);
	fill(a + 12288, 300, "srq");
	wr = (struct ibv_send_wr){ .wr_id = 4, .opcode = IBV_WR_SEND };
	post_send(qc, &wr, ma, a + 12288, 300);
	wc = poll_one(rcq, IBV_WC_RECV);
	CHECK(wc.wr_id == 8 && wc.byte_len == 300 && wc.qp_num == qd->qp_num,
	      "recv wr_id %llu byte_len %u qp_num %u", (unsigned long long)wc.wr_id, wc.byte_len,
	      wc.qp_num);
	wc = poll_one(scq, IBV_WC_SEND);
	CHECK(memcmp(a + 12288, b + 12288, 300) == 0, "received bytes differ");
	/* rcq was armed again: this completion raised a second event. */
	CHECK(poll(&pfd, 1, TIMEOUT_MS) == 1, "no second completion event");
	CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0 && ev_cq == rcq,
	      "ibv_get_cq_event: %s", strerror(errno));
	ibv_ack_cq_events(ev_cq, 1);
	pass();

	step = "UD SEND to itself through an AH";
	struct ibv_qp *qu = create_qp(&d, IBV_QPT_UD, ucq, ucq, NULL, NULL);
	struct ibv_qp_attr ua = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = d.port,
				  .qkey = QKEY };
	modify(qu, &ua, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, "INIT");
	ua = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR };
	modify(qu, &ua, IBV_QP_STATE, "RTR");
	ua = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = 0x42 };
	modify(qu, &ua, IBV_QP_STATE | IBV_QP_SQ_PSN, "RTS");
	struct ibv_ah_attr aha;
	ah_to_self(&d, &aha);
	struct ibv_ah *ah = ibv_create_ah(d.pd, &aha);
	CHECK(ah && ah->pd == d.pd, "ibv_create_ah: %s", strerror(errno));
	memset(b, 0, 1024);
	post_recv(qu, NULL, mb, b, GRH + 512, 9);
	fill(a, 256, "ud");
	wr = (struct ibv_send_wr){ .wr_id = 5, .opcode = IBV_WR_SEND };
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qu->qp_num;
	wr.wr.ud.remote_qkey = QKEY;
	post_send(qu, &wr, ma, a, 256);
	struct ibv_wc two[2];
	int got = 0;
	int64_t end = now_ms() + TIMEOUT_MS;
	while (got < 2) {
		int n = ibv_poll_cq(ucq, 2 - got, two + got);
		CHECK(n >= 0, "ibv_poll_cq: %d", n);
		got += n;
		CHECK(got == 2 || now_ms() < end, "%d of 2 completions after %d ms", got, TIMEOUT_MS);
	}
	struct ibv_wc *rw = two[0].opcode == IBV_WC_RECV ? &two[0] : &two[1];
	struct ibv_wc *sw = rw == &two[0] ? &two[1] : &two[0];
	CHECK(rw->status == IBV_WC_SUCCESS && sw->status == IBV_WC_SUCCESS, "statuses %s, %s",
	      ibv_wc_status_str(rw->status), ibv_wc_status_str(sw->status));
	CHECK(rw->opcode == IBV_WC_RECV && sw->opcode == IBV_WC_SEND, "opcodes %d, %d",
	      rw->opcode, sw->opcode);
	CHECK(rw->byte_len == GRH + 256 && (rw->wc_flags & IBV_WC_GRH) &&
	      rw->src_qp == qu->qp_num, "recv byte_len %u, flags %#x, src_qp %u", rw->byte_len,
	      rw->wc_flags, rw->src_qp);
	CHECK(memcmp(a, b + GRH, 256) == 0, "received bytes differ");
	pass();

	step = "destroy everything";
	CHECK(ibv_destroy_ah(ah) == 0, "ibv_destroy_ah");
	CHECK(ibv_destroy_qp(qu) == 0 && ibv_destroy_qp(qd) == 0 && ibv_destroy_qp(qc) == 0 &&
	      ibv_destroy_qp(qb) == 0 && ibv_destroy_qp(qa) == 0, "ibv_destroy_qp");
	CHECK(ibv_destroy_srq(srq) == 0, "ibv_destroy_srq");
	CHECK(ibv_destroy_cq(ucq) == 0 && ibv_destroy_cq(rcq) == 0 && ibv_destroy_cq(scq) == 0,
	      "ibv_destroy_cq");
	CHECK(ibv_destroy_comp_channel(ch) == 0, "ibv_destroy_comp_channel");
	CHECK(ibv_dereg_mr(ma) == 0 && ibv_dereg_mr(mb) == 0, "ibv_dereg_mr");
	CHECK(ibv_dealloc_pd(d.pd) == 0, "ibv_dealloc_pd");
	CHECK(ibv_close_device(d.ctx) == 0, "ibv_close_device");
	free(a);
	free(b);
	pass();
	step = "all";
	pass();
	return 0;
}
