/*
 * One process, two stacks (issue 26): uverbs and Debian's libibverbs +
 * libmlx5 share the model of scripts/on-model.sh. The uverbs side is the
 * shim's test-only C API (preload/src/two_stacks.rs, found with dlsym): a
 * uverbs Context opened on the shim's own model, so the one HCA executes
 * the WQEs of both stacks' QPs.
 *
 * a. RC between a uverbs QP and a libmlx5 QP, in both directions: SEND,
 *    SEND with immediate, RDMA WRITE, RDMA READ, compare-and-swap,
 *    fetch-and-add, inline SEND; UD SEND, SEND with immediate and inline
 *    SEND, both directions. Checked: the bytes, the atomics' old and new values, and
 *    every completion on both sides (wr_id, status, opcode, byte_len where
 *    defined, imm, qp_num, src_qp and GRH for UD).
 * b. The same work requests through both stacks, compared WQE by WQE,
 *    byte by byte (libmlx5's send queue through mlx5dv_init_obj, uverbs'
 *    as the model sees it): the lists of a. (each stack posted the same one
 *    on a fresh QP) and a longer RC list on two more fresh QPs (unsignaled,
 *    solicited, fenced, RDMA WRITE with immediate, inline of one and two
 *    basic blocks, inline RDMA WRITE, zero-length SEND). Only fields that
 *    name different objects may differ, and each must then hold what its
 *    own stack was asked for (see compare_wqes).
 *
 * Exits 0 when everything matched.
 *
 *   eval "$(scripts/on-model.sh --print-env)"
 *   cc $CFLAGS preload/tests/two_stacks.c $LDFLAGS -libverbs -lmlx5 -o two_stacks
 *   scripts/on-model.sh -- ./two_stacks
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <endian.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

#define BUF (64 * 1024)
#define DEPTH 64
#define MAX_INLINE 64
#define QKEY 0x11111111u
#define FLOW_LABEL 0x12345u /* fixes the RoCE v2 UDP source port of the AHs */

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "two_stacks: FAIL: " __VA_ARGS__); \
	fprintf(stderr, "\n"); failures++; } } while (0)
#define DIE(...) do { fprintf(stderr, "two_stacks: " __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)

/* preload/src/two_stacks.rs: struct TsWr, struct TsWc. */
struct ts_wr {
	uint64_t wr_id;
	uint32_t opcode, send_flags; /* IBV_WR_*, IBV_SEND_* */
	uint64_t addr;
	uint32_t length, lkey;
	uint64_t remote_addr;
	uint32_t rkey, imm; /* imm in host order */
	uint64_t compare_add, swap;
	uint32_t remote_qpn, remote_qkey; /* UD */
};
struct ts_wc {
	uint64_t wr_id;
	uint32_t status, opcode, byte_len, imm, qp_num, src_qp, wc_flags, pad;
};

_Static_assert(sizeof(struct ts_wr) == 72 && sizeof(struct ts_wc) == 40, "as in two_stacks.rs");

static int (*ts_open)(void);
static void (*ts_close)(void);
static int (*ts_reg_mr)(void *, size_t, uint32_t *, uint32_t *);
static int64_t (*ts_create_qp)(int, uint32_t, uint32_t);
static int (*ts_connect)(uint32_t, uint32_t, const uint8_t *, uint32_t);
static int (*ts_post_send)(uint32_t, const struct ts_wr *, size_t);
static int (*ts_post_recv)(uint32_t, uint64_t, uint64_t, uint32_t, uint32_t);
static int (*ts_poll)(struct ts_wc *, int);
static int (*ts_sq)(uint32_t, const uint8_t **, uint32_t *);

static void *sym(const char *name)
{
	void *f = dlsym(RTLD_DEFAULT, name);
	if (!f)
		DIE("%s not found: run under scripts/on-model.sh", name);
	return f;
}

/* One stack: its buffer (one MR), CQ (libmlx5; uverbs has its own). */
struct stack {
	const char *name;
	int uverbs;
	uint8_t *buf;
	uint32_t lkey, rkey;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_ah *ah;
};

struct q {
	struct stack *s;
	uint32_t qpn;
	struct ibv_qp *qp; /* libmlx5's; NULL on uverbs */
	int ud;
};

static union ibv_gid gid;

static void connect_ibv(struct ibv_qp *qp, uint32_t remote, int ud)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, .qkey = QKEY };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS)))
		DIE("INIT: %m");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = remote;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, ud ? IBV_QP_STATE : IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		DIE("RTR: %m");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(qp, &a, ud ? IBV_QP_STATE | IBV_QP_SQ_PSN : IBV_QP_STATE | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		DIE("RTS: %m");
}

static struct q make_qp(struct stack *s, int ud)
{
	struct q q = { .s = s, .ud = ud };
	if (s->uverbs) {
		int64_t n = ts_create_qp(ud ? IBV_QPT_UD : IBV_QPT_RC, DEPTH, MAX_INLINE);
		if (n < 0)
			DIE("uverbs create_qp failed");
		q.qpn = (uint32_t)n;
		return q;
	}
	struct ibv_qp_init_attr ia = { .send_cq = s->cq, .recv_cq = s->cq,
		.qp_type = ud ? IBV_QPT_UD : IBV_QPT_RC,
		.cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = MAX_INLINE } };
	q.qp = ibv_create_qp(s->pd, &ia);
	if (!q.qp)
		DIE("ibv_create_qp: %m");
	q.qpn = q.qp->qp_num;
	return q;
}

static void connect_q(struct q *q, uint32_t remote)
{
	if (q->s->uverbs) {
		if (ts_connect(q->qpn, remote, gid.raw, FLOW_LABEL))
			DIE("uverbs connect failed");
	} else {
		connect_ibv(q->qp, remote, q->ud);
	}
}

static void post_send(struct q *q, const struct ts_wr *w, int n)
{
	if (q->s->uverbs) {
		if (ts_post_send(q->qpn, w, (size_t)n))
			DIE("uverbs post_send failed");
		return;
	}
	struct ibv_send_wr wr[32], *bad;
	struct ibv_sge sge[32];
	memset(wr, 0, sizeof wr);
	for (int i = 0; i < n; i++) {
		sge[i] = (struct ibv_sge){ w[i].addr, w[i].length, w[i].lkey };
		wr[i].wr_id = w[i].wr_id;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = w[i].length ? 1 : 0;
		wr[i].opcode = (enum ibv_wr_opcode)w[i].opcode;
		wr[i].send_flags = w[i].send_flags;
		wr[i].imm_data = htonl(w[i].imm);
		if (q->ud) {
			wr[i].wr.ud.ah = q->s->ah;
			wr[i].wr.ud.remote_qpn = w[i].remote_qpn;
			wr[i].wr.ud.remote_qkey = w[i].remote_qkey;
		} else if (w[i].opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
			   w[i].opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			wr[i].wr.atomic.remote_addr = w[i].remote_addr;
			wr[i].wr.atomic.rkey = w[i].rkey;
			wr[i].wr.atomic.compare_add = w[i].compare_add;
			wr[i].wr.atomic.swap = w[i].swap;
		} else {
			wr[i].wr.rdma.remote_addr = w[i].remote_addr;
			wr[i].wr.rdma.rkey = w[i].rkey;
		}
	}
	if (ibv_post_send(q->qp, wr, &bad))
		DIE("ibv_post_send: %m");
}

static void post_recv(struct q *q, uint64_t wr_id, size_t off, uint32_t len)
{
	struct stack *s = q->s;
	if (s->uverbs) {
		if (ts_post_recv(q->qpn, wr_id, (uintptr_t)(s->buf + off), len, s->lkey))
			DIE("uverbs post_recv failed");
		return;
	}
	struct ibv_sge sge = { (uintptr_t)(s->buf + off), len, s->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;
	if (ibv_post_recv(q->qp, &wr, &bad))
		DIE("ibv_post_recv: %m");
}

/* Exactly n completions from the stack's CQ (10 s at most), then none. */
static void poll_n(struct stack *s, struct ts_wc *out, int n)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int got = 0;
	for (;;) {
		if (s->uverbs) {
			int k = ts_poll(out + got, n - got);
			if (k < 0)
				DIE("uverbs poll failed");
			got += k;
		} else {
			struct ibv_wc wc[16];
			int k = ibv_poll_cq(s->cq, n - got < 16 ? n - got : 16, wc);
			if (k < 0)
				DIE("ibv_poll_cq: %d", k);
			for (int i = 0; i < k; i++, got++)
				out[got] = (struct ts_wc){ wc[i].wr_id, wc[i].status, wc[i].opcode,
					wc[i].byte_len, ntohl(wc[i].imm_data), wc[i].qp_num, wc[i].src_qp,
					wc[i].wc_flags, 0 };
		}
		if (got == n)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 10)
			DIE("%s: %d of %d completions after 10 s", s->name, got, n);
	}
	struct ts_wc extra;
	struct ibv_wc wextra;
	int k = s->uverbs ? ts_poll(&extra, 1) : ibv_poll_cq(s->cq, 1, &wextra);
	CHECK(k == 0, "%s: a completion beyond the %d expected", s->name, n);
}

static void check_wc(const char *what, const struct ts_wc *c, uint64_t wr_id, int opcode,
		     uint32_t qpn)
{
	CHECK(c->wr_id == wr_id && c->status == IBV_WC_SUCCESS && c->opcode == (uint32_t)opcode &&
	      c->qp_num == qpn,
	      "%s: wc wr_id %llu status %s opcode %u qp_num %#x, expected wr_id %llu SUCCESS opcode %d qp_num %#x",
	      what, (unsigned long long)c->wr_id, ibv_wc_status_str(c->status), c->opcode, c->qp_num,
	      (unsigned long long)wr_id, opcode, qpn);
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 13 + seed * 29 + 1);
}

static uint64_t at(struct stack *s, size_t off) { return (uintptr_t)(s->buf + off); }

static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* The RC list of a.: S posts, R answers. Returns the count. */
static int rc_list(struct ts_wr *w, struct stack *S, struct stack *R)
{
	uint32_t lk = S->lkey, rk = R->rkey;
	w[0] = (struct ts_wr){ .wr_id = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		.addr = at(S, 0), .length = 100, .lkey = lk };
	w[1] = (struct ts_wr){ .wr_id = 2, .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
		.addr = at(S, 128), .length = 50, .lkey = lk, .imm = 0x12345678 };
	w[2] = (struct ts_wr){ .wr_id = 3, .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		.addr = at(S, 256), .length = 200, .lkey = lk, .remote_addr = at(R, 0x2000), .rkey = rk };
	w[3] = (struct ts_wr){ .wr_id = 4, .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED,
		.addr = at(S, 0x800), .length = 300, .lkey = lk, .remote_addr = at(R, 0x3000), .rkey = rk };
	w[4] = (struct ts_wr){ .wr_id = 5, .opcode = IBV_WR_ATOMIC_CMP_AND_SWP, .send_flags = IBV_SEND_SIGNALED,
		.addr = at(S, 0xa00), .length = 8, .lkey = lk, .remote_addr = at(R, 0x4000), .rkey = rk,
		.compare_add = 100, .swap = 200 };
	w[5] = (struct ts_wr){ .wr_id = 6, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .send_flags = IBV_SEND_SIGNALED,
		.addr = at(S, 0xa08), .length = 8, .lkey = lk, .remote_addr = at(R, 0x4008), .rkey = rk,
		.compare_add = 10 };
	w[6] = (struct ts_wr){ .wr_id = 7, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE, .addr = at(S, 0x600), .length = 40,
		.lkey = lk };
	return 7;
}

static void rc_traffic(struct q *sq, struct q *rq, const char *dir)
{
	struct stack *S = sq->s, *R = rq->s;
	char what[128];
	fill(S->buf, 0x1000, 1);
	memset(S->buf + 0x800, 0, 0x300);
	memset(R->buf, 0, 0x5000);
	fill(R->buf + 0x3000, 300, 2);
	put64(R->buf + 0x4000, 100);
	put64(R->buf + 0x4008, 5);
	for (int i = 0; i < 3; i++)
		post_recv(rq, 101 + i, 0x1000 + 0x100 * i, 256);
	struct ts_wr w[8];
	int n = rc_list(w, S, R);
	post_send(sq, w, n);

	struct ts_wc c[8];
	static const int ops[] = { IBV_WC_SEND, IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ,
		IBV_WC_COMP_SWAP, IBV_WC_FETCH_ADD, IBV_WC_SEND };
	static const char *names[] = { "SEND", "SEND with imm", "RDMA WRITE", "RDMA READ",
		"compare-and-swap", "fetch-and-add", "inline SEND" };
	poll_n(S, c, n);
	for (int i = 0; i < n; i++) {
		snprintf(what, sizeof what, "RC %s: %s, requester", dir, names[i]);
		check_wc(what, &c[i], w[i].wr_id, ops[i], sq->qpn);
	}
	CHECK(c[3].byte_len == 300, "RC %s: RDMA READ byte_len %u", dir, c[3].byte_len);
	CHECK(c[4].byte_len == 8 && c[5].byte_len == 8, "RC %s: atomics byte_len %u %u", dir,
	      c[4].byte_len, c[5].byte_len);

	struct ts_wc r[3];
	poll_n(R, r, 3);
	static const uint32_t lens[] = { 100, 50, 40 };
	static const size_t srcs[] = { 0, 128, 0x600 };
	for (int i = 0; i < 3; i++) {
		snprintf(what, sizeof what, "RC %s: %s, responder", dir, names[i == 2 ? 6 : i]);
		check_wc(what, &r[i], 101 + i, IBV_WC_RECV, rq->qpn);
		CHECK(r[i].byte_len == lens[i], "%s: byte_len %u, expected %u", what, r[i].byte_len, lens[i]);
		CHECK(!!(r[i].wc_flags & IBV_WC_WITH_IMM) == (i == 1), "%s: wc_flags %#x", what, r[i].wc_flags);
		CHECK(memcmp(R->buf + 0x1000 + 0x100 * i, S->buf + srcs[i], lens[i]) == 0,
		      "%s: the received bytes differ", what);
	}
	CHECK(r[1].imm == 0x12345678, "RC %s: imm %#x", dir, r[1].imm);
	CHECK(memcmp(R->buf + 0x2000, S->buf + 256, 200) == 0, "RC %s: RDMA WRITE bytes differ", dir);
	CHECK(R->buf[0x2000 + 200] == 0, "RC %s: RDMA WRITE wrote beyond its length", dir);
	CHECK(memcmp(S->buf + 0x800, R->buf + 0x3000, 300) == 0, "RC %s: RDMA READ bytes differ", dir);
	CHECK(S->buf[0x800 + 300] == 0, "RC %s: RDMA READ wrote beyond its length", dir);
	CHECK(get64(S->buf + 0xa00) == 100 && get64(R->buf + 0x4000) == 200,
	      "RC %s: compare-and-swap returned %llu, left %llu (expected 100, 200)", dir,
	      (unsigned long long)get64(S->buf + 0xa00), (unsigned long long)get64(R->buf + 0x4000));
	CHECK(get64(S->buf + 0xa08) == 5 && get64(R->buf + 0x4008) == 15,
	      "RC %s: fetch-and-add returned %llu, left %llu (expected 5, 15)", dir,
	      (unsigned long long)get64(S->buf + 0xa08), (unsigned long long)get64(R->buf + 0x4008));
	printf("RC %s: SEND, SEND with imm, RDMA WRITE, RDMA READ, CAS, FAA, inline SEND: %s\n", dir,
	       failures ? "FAILED" : "ok");
}

static int ud_list(struct ts_wr *w, struct stack *S, uint32_t dqpn)
{
	w[0] = (struct ts_wr){ .wr_id = 11, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		.addr = at(S, 0x5800), .length = 64, .lkey = S->lkey, .remote_qpn = dqpn, .remote_qkey = QKEY };
	w[1] = (struct ts_wr){ .wr_id = 12, .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
		.addr = at(S, 0x5900), .length = 33, .lkey = S->lkey, .imm = 0xfeedf00d, .remote_qpn = dqpn,
		.remote_qkey = QKEY };
	w[2] = (struct ts_wr){ .wr_id = 13, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE, .addr = at(S, 0x5a00), .length = 24,
		.lkey = S->lkey, .remote_qpn = dqpn, .remote_qkey = QKEY };
	return 3;
}

static void ud_traffic(struct q *sq, struct q *rq, const char *dir)
{
	struct stack *S = sq->s, *R = rq->s;
	char what[128];
	fill(S->buf + 0x5800, 0x300, 3);
	memset(R->buf + 0x5000, 0, 0x800);
	for (int i = 0; i < 3; i++)
		post_recv(rq, 111 + i, 0x5000 + 0x400 * i, 40 + 256);
	struct ts_wr w[3];
	int n = ud_list(w, S, rq->qpn);
	post_send(sq, w, n);
	struct ts_wc c[3], r[3];
	static const char *names[] = { "SEND", "SEND with imm", "inline SEND" };
	poll_n(S, c, n);
	for (int i = 0; i < n; i++) {
		snprintf(what, sizeof what, "UD %s: %s, requester", dir, names[i]);
		check_wc(what, &c[i], w[i].wr_id, IBV_WC_SEND, sq->qpn);
	}
	poll_n(R, r, n);
	for (int i = 0; i < n; i++) {
		snprintf(what, sizeof what, "UD %s: %s, responder", dir, names[i]);
		check_wc(what, &r[i], 111 + i, IBV_WC_RECV, rq->qpn);
		CHECK(r[i].byte_len == 40 + w[i].length, "%s: byte_len %u", what, r[i].byte_len);
		CHECK(r[i].src_qp == sq->qpn, "%s: src_qp %#x, expected %#x", what, r[i].src_qp, sq->qpn);
		CHECK((r[i].wc_flags & IBV_WC_GRH) && !!(r[i].wc_flags & IBV_WC_WITH_IMM) == (i == 1),
		      "%s: wc_flags %#x", what, r[i].wc_flags);
		CHECK(memcmp(R->buf + 0x5000 + 0x400 * i + 40, (void *)(uintptr_t)w[i].addr, w[i].length) == 0,
		      "%s: the received bytes differ", what);
	}
	CHECK(r[1].imm == 0xfeedf00d, "UD %s: imm %#x", dir, r[1].imm);
	printf("UD %s: SEND, SEND with imm, inline SEND: %s\n", dir, failures ? "FAILED" : "ok");
}

/* The longer RC list of b. (R must have 7 receives posted). */
static int b_list(struct ts_wr *w, struct stack *S, struct stack *R)
{
	uint32_t lk = S->lkey, rk = R->rkey;
	int n = 0;
	w[n++] = (struct ts_wr){ .wr_id = 21, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		.addr = at(S, 0x8000), .length = 64, .lkey = lk };
	w[n++] = (struct ts_wr){ .wr_id = 22, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SOLICITED,
		.addr = at(S, 0x8040), .length = 32, .lkey = lk };
	w[n++] = (struct ts_wr){ .wr_id = 23, .opcode = IBV_WR_SEND_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED, .addr = at(S, 0x8080), .length = 16,
		.lkey = lk, .imm = 0xa5a5a5a5 };
	w[n++] = (struct ts_wr){ .wr_id = 24, .opcode = IBV_WR_RDMA_WRITE, .addr = at(S, 0x8100),
		.length = 128, .lkey = lk, .remote_addr = at(R, 0x9000), .rkey = rk };
	w[n++] = (struct ts_wr){ .wr_id = 25, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED, .addr = at(S, 0x8200), .length = 8, .lkey = lk,
		.remote_addr = at(R, 0x9100), .rkey = rk, .imm = 0x01020304 };
	w[n++] = (struct ts_wr){ .wr_id = 26, .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED,
		.addr = at(S, 0x8400), .length = 64, .lkey = lk, .remote_addr = at(R, 0x9200), .rkey = rk };
	w[n++] = (struct ts_wr){ .wr_id = 27, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE, .addr = at(S, 0x8400), .length = 64,
		.lkey = lk, .remote_addr = at(R, 0x9300), .rkey = rk };
	w[n++] = (struct ts_wr){ .wr_id = 28, .opcode = IBV_WR_ATOMIC_CMP_AND_SWP,
		.send_flags = IBV_SEND_SIGNALED, .addr = at(S, 0x8500), .length = 8, .lkey = lk,
		.remote_addr = at(R, 0x9400), .rkey = rk, .compare_add = 7, .swap = 0x1122334455667788ull };
	w[n++] = (struct ts_wr){ .wr_id = 29, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE, .addr = at(S, 0x8508), .length = 8,
		.lkey = lk, .remote_addr = at(R, 0x9408), .rkey = rk, .compare_add = 0x100000001ull };
	w[n++] = (struct ts_wr){ .wr_id = 30, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE, .addr = at(S, 0x8600), .length = 20,
		.lkey = lk };
	w[n++] = (struct ts_wr){ .wr_id = 31, .opcode = IBV_WR_SEND_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE, .addr = at(S, 0x8700), .length = 60,
		.lkey = lk, .imm = 0xcafe };
	w[n++] = (struct ts_wr){ .wr_id = 32, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE, .addr = at(S, 0x8800), .length = 33,
		.lkey = lk, .remote_addr = at(R, 0x9500), .rkey = rk };
	w[n++] = (struct ts_wr){ .wr_id = 33, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		.addr = at(S, 0x8900), .length = 0, .lkey = lk };
	return n;
}

/* Where a stack's send queue is, as its library (libmlx5: mlx5dv_init_obj)
 * or the device (uverbs: the model's view of the QP) sees it. */
static const uint8_t *sq_of(struct q *q, uint32_t *cnt)
{
	if (q->s->uverbs) {
		const uint8_t *b;
		if (ts_sq(q->qpn, &b, cnt))
			DIE("uverbs_ts_sq failed");
		return b;
	}
	struct mlx5dv_qp dv;
	struct mlx5dv_obj o = { .qp = { .in = q->qp, .out = &dv } };
	if (mlx5dv_init_obj(&o, MLX5DV_OBJ_QP))
		DIE("mlx5dv_init_obj: %m");
	if (dv.sq.stride != 64)
		DIE("libmlx5 SQ stride %u", dv.sq.stride);
	*cnt = dv.sq.wqe_cnt;
	return dv.sq.buf;
}

static uint32_t be32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return be32toh(v); }
static uint64_t be64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return be64toh(v); }

static int wqe_diffs;
#define DIFF(...) do { fprintf(stderr, "two_stacks: WQE mismatch: " __VA_ARGS__); \
	fprintf(stderr, "\n"); wqe_diffs++; } while (0)

static void cmp_bytes(const char *what, const char *field, const uint8_t *u, const uint8_t *l,
		      int off, int len)
{
	for (int i = 0; i < len; i++)
		if (u[off + i] != l[off + i]) {
			int j = i;
			while (j + 1 < len && u[off + j + 1] != l[off + j + 1])
				j++;
			DIFF("%s: %s, bytes %d-%d: uverbs %02x.. libmlx5 %02x..", what, field, off + i,
			     off + j, u[off + i], l[off + i]);
			i = j;
		}
}

/*
 * Compares the first n WQEs of u's (uverbs) and l's (libmlx5) send queues,
 * both fresh QPs on which the same list was posted: u's towards up (its
 * peer), l's towards lp. Every byte of the ds * 16 bytes each WQE declares
 * must be equal, except these, which name different objects; each must then
 * hold what its own stack was asked for:
 *  - ctrl qpn_ds, QP number (bytes 4-6): each QP's own number;
 *  - UD datagram segment dqp_dct: the destination QP, each stack's peer
 *    (| MLX5_EXTENDED_UD_AV);
 *  - remote address segment raddr and rkey: a buffer of each stack's peer,
 *    the same offset into it, and the peer's rkey;
 *  - data segment lkey and addr: each stack's own buffer, at the same
 *    offset, and its own lkey.
 * Equal by construction, so compared: the WQE index (both QPs fresh, the
 * same list), the signature (0: neither asks for WQE signatures), the
 * fence/CE/SE bits, the immediates, the atomic operands, the inline bytes,
 * the address vector (same GID, hop limit and flow label, so the same UDP
 * source port) and every reserved byte. BlueFlame is not in the WQE
 * (which register a stack copied it to is the model's business: it checks
 * the copy equals the WQE).
 */
static void compare_wqes(const char *what, struct q *u, struct q *l, struct q *up, struct q *lp, int n)
{
	uint32_t ucnt, lcnt;
	const uint8_t *ub = sq_of(u, &ucnt), *lb = sq_of(l, &lcnt);
	/* Both stacks size as libmlx5 does (providers/mlx5/qp_size.rs): an
	 * RC WQE leaves room for a memory-window bind (192-byte overhead,
	 * _sq_overhead), so 64 WRs of 64 inline bytes take 512 basic blocks
	 * on each. */
	printf("WQEs %s: SQ of %u basic blocks on uverbs, %u on libmlx5\n", what, ucnt, lcnt);
	CHECK(ucnt == lcnt, "%s: %s SQ of %u basic blocks on uverbs, %u on libmlx5", what,
	      u->ud ? "UD" : "RC", ucnt, lcnt);
	int before = wqe_diffs;
	uint32_t idx = 0;
	for (int k = 0; k < n; k++) {
		char w[160];
		const uint8_t *uw = ub + 64 * idx, *lw = lb + 64 * idx;
		int uds = uw[7] & 0x3f, lds = lw[7] & 0x3f;
		snprintf(w, sizeof w, "%s WQE %d (index %u, opcode %#x)", what, k, idx, lw[3]);
		if (uds != lds) {
			DIFF("%s: ds %d on uverbs, %d on libmlx5", w, uds, lds);
			for (int i = 0; i < 16 * (uds > lds ? uds : lds); i += 16)
				fprintf(stderr, "  %3d: uverbs %08x %08x %08x %08x  libmlx5 %08x %08x %08x %08x\n", i,
					be32(uw + i), be32(uw + i + 4), be32(uw + i + 8), be32(uw + i + 12),
					be32(lw + i), be32(lw + i + 4), be32(lw + i + 8), be32(lw + i + 12));
			return;
		}
		if (idx + (uint32_t)(lds + 3) / 4 > lcnt)
			DIE("%s: the list wraps the queue", w);
		if (getenv("TWO_STACKS_DUMP")) /* TWO_STACKS_DUMP=1: every WQE compared, both sides */
			for (int i = 0; i < 16 * lds; i += 16)
				printf("%s %3d: uverbs %08x %08x %08x %08x  libmlx5 %08x %08x %08x %08x\n", w, i,
				       be32(uw + i), be32(uw + i + 4), be32(uw + i + 8), be32(uw + i + 12),
				       be32(lw + i), be32(lw + i + 4), be32(lw + i + 8), be32(lw + i + 12));
		/* ctrl: opmod, WQE index, opcode; ds; signature, stream id, fm_ce_se; imm */
		cmp_bytes(w, "ctrl opmod/index/opcode", uw, lw, 0, 4);
		CHECK(be32(uw + 4) >> 8 == u->qpn && be32(lw + 4) >> 8 == l->qpn,
		      "%s: ctrl QP numbers %#x %#x", w, be32(uw + 4) >> 8, be32(lw + 4) >> 8);
		cmp_bytes(w, "ctrl ds", uw, lw, 7, 1);
		cmp_bytes(w, "ctrl signature", uw, lw, 8, 1);
		cmp_bytes(w, "ctrl dci_stream_channel_id", uw, lw, 9, 2);
		cmp_bytes(w, "ctrl fm_ce_se", uw, lw, 11, 1);
		cmp_bytes(w, "ctrl imm", uw, lw, 12, 4);
		int off = 16, op = lw[3];
		if (u->ud) {
			/* struct mlx5_wqe_av: key, dqp_dct, stat_rate_sl, fl_mlid, rlid,
			 * reserved0, rmac, tclass, hop_limit, grh_gid_fl, rgid */
			cmp_bytes(w, "av key (Q_Key)", uw, lw, off, 8);
			CHECK(be32(uw + off + 8) == (up->qpn | 0x80000000u) &&
			      be32(lw + off + 8) == (lp->qpn | 0x80000000u),
			      "%s: av dqp_dct %#x %#x", w, be32(uw + off + 8), be32(lw + off + 8));
			cmp_bytes(w, "av stat_rate_sl", uw, lw, off + 12, 1);
			cmp_bytes(w, "av fl_mlid", uw, lw, off + 13, 1);
			cmp_bytes(w, "av rlid (RoCE v2 UDP source port)", uw, lw, off + 14, 2);
			cmp_bytes(w, "av reserved0", uw, lw, off + 16, 4);
			cmp_bytes(w, "av rmac", uw, lw, off + 20, 6);
			cmp_bytes(w, "av tclass", uw, lw, off + 26, 1);
			cmp_bytes(w, "av hop_limit", uw, lw, off + 27, 1);
			cmp_bytes(w, "av grh_gid_fl", uw, lw, off + 28, 4);
			cmp_bytes(w, "av rgid", uw, lw, off + 32, 16);
			off += 48;
		}
		if (op == 0x08 || op == 0x09 || op == 0x10 || op == 0x11 || op == 0x12) {
			uint64_t ur = be64(uw + off), lr = be64(lw + off);
			CHECK(ur - (uintptr_t)up->s->buf == lr - (uintptr_t)lp->s->buf && ur - (uintptr_t)up->s->buf < BUF,
			      "%s: raddr %#llx %#llx at different offsets into the peers' buffers", w,
			      (unsigned long long)ur, (unsigned long long)lr);
			CHECK(be32(uw + off + 8) == up->s->rkey && be32(lw + off + 8) == lp->s->rkey,
			      "%s: rkeys %#x %#x, expected the peers' %#x %#x", w, be32(uw + off + 8),
			      be32(lw + off + 8), up->s->rkey, lp->s->rkey);
			cmp_bytes(w, "raddr reserved", uw, lw, off + 12, 4);
			off += 16;
			if (op == 0x11 || op == 0x12) {
				cmp_bytes(w, "atomic swap_add/compare", uw, lw, off, 16);
				off += 16;
			}
		}
		while (off < 16 * lds) {
			cmp_bytes(w, "data byte_count", uw, lw, off, 4);
			if (lw[off] & 0x80) { /* MLX5_INLINE_SEG: the rest is inline data and padding */
				cmp_bytes(w, "inline data", uw, lw, off + 4, 16 * lds - off - 4);
				break;
			}
			CHECK(be32(uw + off + 4) == u->s->lkey && be32(lw + off + 4) == l->s->lkey,
			      "%s: lkeys %#x %#x, expected %#x %#x", w, be32(uw + off + 4), be32(lw + off + 4),
			      u->s->lkey, l->s->lkey);
			uint64_t ua = be64(uw + off + 8), la = be64(lw + off + 8);
			CHECK(ua - (uintptr_t)u->s->buf == la - (uintptr_t)l->s->buf && ua - (uintptr_t)u->s->buf < BUF,
			      "%s: data addresses %#llx %#llx at different offsets into the buffers", w,
			      (unsigned long long)ua, (unsigned long long)la);
			off += 16;
		}
		idx += (uint32_t)(lds + 3) / 4;
	}
	printf("WQEs %s: %d WQEs (%u basic blocks) compared: %s\n", what, n, idx,
	       wqe_diffs == before ? "equal but for QP numbers, keys, addresses (and UD destination QPs)"
				   : "MISMATCH");
}

int main(void)
{
	ts_open = sym("uverbs_ts_open");
	ts_close = sym("uverbs_ts_close");
	ts_reg_mr = sym("uverbs_ts_reg_mr");
	ts_create_qp = sym("uverbs_ts_create_qp");
	ts_connect = sym("uverbs_ts_connect");
	ts_post_send = sym("uverbs_ts_post_send");
	ts_post_recv = sym("uverbs_ts_post_recv");
	ts_poll = sym("uverbs_ts_poll");
	ts_sq = sym("uverbs_ts_sq");

	int nd;
	struct ibv_device **l = ibv_get_device_list(&nd);
	if (!l || !nd)
		DIE("no devices");
	struct ibv_context *c = ibv_open_device(l[0]);
	if (!c)
		DIE("ibv_open_device: %m");
	if (ibv_query_gid(c, 1, 1, &gid))
		DIE("ibv_query_gid: %m");

	struct stack L = { .name = "libmlx5" }, U = { .name = "uverbs", .uverbs = 1 };
	L.buf = aligned_alloc(4096, BUF);
	U.buf = aligned_alloc(4096, BUF);
	memset(L.buf, 0, BUF);
	memset(U.buf, 0, BUF);
	L.pd = ibv_alloc_pd(c);
	if (!L.pd)
		DIE("ibv_alloc_pd: %m");
	struct ibv_mr *mr = ibv_reg_mr(L.pd, L.buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr)
		DIE("ibv_reg_mr: %m");
	L.lkey = mr->lkey;
	L.rkey = mr->rkey;
	L.cq = ibv_create_cq(c, 256, NULL, NULL, 0);
	if (!L.cq)
		DIE("ibv_create_cq: %m");
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
		.grh = { .dgid = gid, .sgid_index = 1, .hop_limit = 64, .flow_label = FLOW_LABEL } };
	L.ah = ibv_create_ah(L.pd, &aa);
	if (!L.ah)
		DIE("ibv_create_ah: %m");
	if (ts_open() || ts_reg_mr(U.buf, BUF, &U.lkey, &U.rkey))
		DIE("uverbs side: open or reg_mr failed");

	/* a. */
	struct q u_rc = make_qp(&U, 0), l_rc = make_qp(&L, 0);
	struct q u_ud = make_qp(&U, 1), l_ud = make_qp(&L, 1);
	connect_q(&u_rc, l_rc.qpn);
	connect_q(&l_rc, u_rc.qpn);
	connect_q(&u_ud, 0);
	connect_q(&l_ud, 0);
	printf("uverbs RC QP %#x <-> libmlx5 RC QP %#x; UD QPs %#x, %#x\n", u_rc.qpn, l_rc.qpn,
	       u_ud.qpn, l_ud.qpn);
	rc_traffic(&u_rc, &l_rc, "uverbs -> libmlx5");
	rc_traffic(&l_rc, &u_rc, "libmlx5 -> uverbs");
	ud_traffic(&u_ud, &l_ud, "uverbs -> libmlx5");
	ud_traffic(&l_ud, &u_ud, "libmlx5 -> uverbs");

	/* b. The lists of a., then a longer one on two fresh QPs. */
	compare_wqes("RC list of a.", &u_rc, &l_rc, &l_rc, &u_rc, 7);
	compare_wqes("UD list of a.", &u_ud, &l_ud, &l_ud, &u_ud, 3);
	struct q u_b = make_qp(&U, 0), l_b = make_qp(&L, 0);
	connect_q(&u_b, l_b.qpn);
	connect_q(&l_b, u_b.qpn);
	struct ts_wr w[32];
	struct ts_wc wc[32];
	fill(U.buf + 0x8000, 0x1000, 5);
	fill(L.buf + 0x8000, 0x1000, 5); /* the same inline bytes on both */
	for (int i = 0; i < 7; i++) {
		post_recv(&l_b, 200 + i, 0xa000 + 0x100 * i, 256);
		post_recv(&u_b, 200 + i, 0xa000 + 0x100 * i, 256);
	}
	int n = b_list(w, &U, &L);
	post_send(&u_b, w, n);
	poll_n(&U, wc, n - 2); /* 22 and 24 are unsignaled */
	poll_n(&L, wc + n - 2, 7);
	for (int i = 0; i < n - 2 + 7; i++)
		CHECK(wc[i].status == IBV_WC_SUCCESS, "b. uverbs -> libmlx5: wr_id %llu: %s",
		      (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
	n = b_list(w, &L, &U);
	post_send(&l_b, w, n);
	poll_n(&L, wc, n - 2);
	poll_n(&U, wc + n - 2, 7);
	for (int i = 0; i < n - 2 + 7; i++)
		CHECK(wc[i].status == IBV_WC_SUCCESS, "b. libmlx5 -> uverbs: wr_id %llu: %s",
		      (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
	compare_wqes("RC list of b.", &u_b, &l_b, &l_b, &u_b, n);

	ts_close();
	if (ibv_destroy_qp(l_rc.qp) || ibv_destroy_qp(l_ud.qp) || ibv_destroy_qp(l_b.qp) ||
	    ibv_destroy_ah(L.ah) || ibv_destroy_cq(L.cq) || ibv_dereg_mr(mr) || ibv_dealloc_pd(L.pd) ||
	    ibv_close_device(c))
		DIE("teardown: %m");
	ibv_free_device_list(l);
	free(L.buf);
	free(U.buf);
	if (failures || wqe_diffs) {
		fprintf(stderr, "two_stacks: %d check(s) and %d WQE byte(s) failed\n", failures, wqe_diffs);
		return 1;
	}
	printf("two_stacks: ok\n");
	return 0;
}
