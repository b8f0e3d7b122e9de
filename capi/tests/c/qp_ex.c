/* ibv_qp_ex (ibv_qp_to_qp_ex and the ibv_wr_* calls) over rxe0's loopback:
 * every operation rxe's provider posts, on RC (send, send_imm, RDMA write,
 * write_imm, read, both atomics, inline data and inline lists, SGE lists),
 * UC and UD (ibv_wr_set_ud_addr), several requests in one session,
 * ibv_wr_abort, and the errors ibv_wr_complete reports (ENOSPC), with what
 * each request did printed in a stable form.
 *
 * Built against Debian's <infiniband/verbs.h> and linked against either
 * library (both export rdma-core's symbol versions):
 *   cc -O1 -Wall -I ~/.cache/uverbs-headers-ibverbs/usr/include \
 *      -o qp_ex capi/tests/c/qp_ex.c -L target/debug -libverbs
 * Run in the rxe guest over this crate's libibverbs.so.1 (LD_LIBRARY_PATH)
 * and over rdma-core's and diff: the lines must be the same but for
 * three checks rdma-core 44's rxe fails: "rc/uc write_imm inline list"
 * (its wr_set_inline_data_list never adds up the length and sends 0 bytes;
 * fixed upstream by 1e8ed0aff) and "rc send sge with IBV_SEND_INLINE in
 * wr_flags" (its kernel then sends the SGE descriptor as the data). The
 * exit status is the number of FAIL lines.
 *
 * `qp_ex --ours` adds what only this crate's library answers: the
 * operations uverbs has no objects for (send_tso, set_xrc_srqn, flush) fail
 * the session with EOPNOTSUPP and post nothing (rdma-core's rxe leaves their
 * slots NULL), and a bind without a window fails it with EINVAL (rdma-core's
 * rxe reads through the NULL). Memory windows, invalidations and atomic
 * writes themselves are pyverbs' tests (test_mr.MWTest, test_qpex). */

#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#define GID_INDEX 1
#define LEN 8192
/* Offsets in the remote (B's) half of the buffer. */
#define R_RECV 0
#define R_WRITE 512
#define R_WRITE2 768
#define R_READ 1024
#define R_ATOMIC 1536
#define REMOTE 4096

static int failures;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static char *buf;
static union ibv_gid gid;

static void check(int ok, const char *what)
{
	printf("%s %s\n", ok ? "PASS" : "FAIL", what);
	if (!ok)
		failures++;
}

static void check_rc(int rc, int want, const char *what)
{
	char line[200];

	snprintf(line, sizeof(line), "%s -> %s", what, want ? strerror(want) : "0");
	if (rc != want)
		printf("  (returned %d %s)\n", rc, rc > 0 ? strerror(rc) : "");
	check(rc == want, line);
}

static struct ibv_context *open_rxe0(void)
{
	struct ibv_device **list;
	struct ibv_context *c = NULL;
	int i, num = -1;

	list = ibv_get_device_list(&num);
	if (!list)
		return NULL;
	for (i = 0; i < num; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "rxe0"))
			c = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return c;
}

/* Two QPs of one type, talking to each other. */
struct pair {
	const char *name;
	struct ibv_cq *cq_a, *cq_b;
	struct ibv_qp *a, *b;
	struct ibv_qp_ex *xa;
	struct ibv_ah *ah; /* UD: to rxe0 itself */
	struct ibv_qp_cap cap;
};

static struct ibv_qp *create_ex(struct ibv_cq *cq, enum ibv_qp_type type, uint64_t ops,
				struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2,
			 .max_recv_sge = 1, .max_inline_data = 64 },
		.qp_type = type,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = ops,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &a);

	if (qp && cap)
		*cap = a.cap;
	return qp;
}

static int to_rts(struct ibv_qp *qp, enum ibv_qp_type type, uint32_t dest)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	if (type == IBV_QPT_UD) {
		a.qkey = 0x11111111;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				    IBV_ACCESS_REMOTE_ATOMIC;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	if (ibv_modify_qp(qp, &a, mask))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (type != IBV_QPT_UD) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = dest;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = gid;
		a.ah_attr.grh.sgid_index = GID_INDEX;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 1;
			a.min_rnr_timer = 12;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	if (ibv_modify_qp(qp, &a, mask))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (type == IBV_QPT_RC) {
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	return ibv_modify_qp(qp, &a, mask);
}

static int make_pair(struct pair *p, const char *name, enum ibv_qp_type type, uint64_t ops)
{
	memset(p, 0, sizeof(*p));
	p->name = name;
	p->cq_a = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	p->cq_b = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!p->cq_a || !p->cq_b)
		return -1;
	p->a = create_ex(p->cq_a, type, ops, &p->cap);
	p->b = create_ex(p->cq_b, type, ops, NULL);
	if (!p->a || !p->b)
		return -1;
	p->xa = ibv_qp_to_qp_ex(p->a);
	if (!p->xa || to_rts(p->a, type, p->b->qp_num) || to_rts(p->b, type, p->a->qp_num))
		return -1;
	if (type == IBV_QPT_UD) {
		struct ibv_ah_attr ah = {
			.is_global = 1,
			.grh = { .dgid = gid, .sgid_index = GID_INDEX, .hop_limit = 1 },
			.port_num = 1,
		};
		p->ah = ibv_create_ah(pd, &ah);
		if (!p->ah)
			return -1;
	}
	return 0;
}

static void free_pair(struct pair *p)
{
	if (p->ah)
		ibv_destroy_ah(p->ah);
	if (p->a)
		ibv_destroy_qp(p->a);
	if (p->b)
		ibv_destroy_qp(p->b);
	if (p->cq_a)
		ibv_destroy_cq(p->cq_a);
	if (p->cq_b)
		ibv_destroy_cq(p->cq_b);
}

static void post_recv(struct pair *p, uint64_t wr_id, uint32_t off, uint32_t len)
{
	struct ibv_sge s = { (uintptr_t)buf + REMOTE + off, len, mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &s, .num_sge = 1 }, *bad;

	if (ibv_post_recv(p->b, &wr, &bad))
		printf("  (post_recv: %s)\n", strerror(errno));
}

/* Polls `cq` for up to `ms`; prints the completion as "<who> wc ...". */
static int wc_line(struct ibv_cq *cq, const char *who, int ms, struct ibv_wc *wc)
{
	struct timespec t = { 0, 1000000 };
	int i, n = 0;

	for (i = 0; i < ms && !(n = ibv_poll_cq(cq, 1, wc)); i++)
		nanosleep(&t, NULL);
	if (n != 1) {
		printf("  %s: no completion\n", who);
		return 0;
	}
	printf("  %s wc: %s opcode %d wr_id %llu byte_len %u", who, ibv_wc_status_str(wc->status),
	       wc->opcode, (unsigned long long)wc->wr_id, wc->byte_len);
	if (wc->wc_flags & IBV_WC_WITH_IMM)
		printf(" imm 0x%x", be32toh(wc->imm_data));
	printf("\n");
	return wc->status == IBV_WC_SUCCESS;
}

/* Nothing arrives within 200 ms on either side. */
static int quiet(struct pair *p)
{
	struct timespec t = { 0, 200000000 };
	struct ibv_wc wc;

	nanosleep(&t, NULL);
	return ibv_poll_cq(p->cq_a, 1, &wc) == 0 && ibv_poll_cq(p->cq_b, 1, &wc) == 0;
}

static uint64_t local(uint32_t off)
{
	return (uintptr_t)buf + off;
}

static uint64_t remote(uint32_t off)
{
	return (uintptr_t)buf + REMOTE + off;
}

static void send_one(struct pair *p, uint64_t wr_id, const char *msg)
{
	struct ibv_qp_ex *x = p->xa;

	strcpy(buf, msg);
	ibv_wr_start(x);
	x->wr_id = wr_id;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	if (p->ah)
		ibv_wr_set_ud_addr(x, p->ah, p->b->qp_num, 0x11111111);
	ibv_wr_set_sge(x, mr->lkey, local(0), strlen(msg));
	check_rc(ibv_wr_complete(x), 0, "  complete");
}

static void rc_ops(struct pair *p)
{
	struct ibv_qp_ex *x = p->xa;
	struct ibv_wc wc;
	char line[200], text[32];
	uint64_t *ra = (uint64_t *)(buf + REMOTE + R_ATOMIC), *old = (uint64_t *)(buf + 64);
	struct ibv_sge list[2];
	struct ibv_data_buf pieces[2] = { { "abc", 3 }, { "defgh", 5 } };
	uint32_t g = p->ah ? 40 : 0; /* a UD receive starts with the GRH */
	int ok;

	/* A SEND from one SGE. */
	post_recv(p, 100, R_RECV, 256);
	send_one(p, 1, "0123456789abcdef");
	ok = wc_line(p->cq_a, "a", 2000, &wc) && wc.wr_id == 1 && wc.opcode == IBV_WC_SEND;
	ok = wc_line(p->cq_b, "b", 2000, &wc) && ok && wc.byte_len == g + 16 &&
	     !memcmp(buf + REMOTE + R_RECV + g, "0123456789abcdef", 16);
	snprintf(line, sizeof(line), "%s send sge", p->name);
	check(ok, line);

	/* A SEND with immediate data, inline (the buffer reused at once). */
	post_recv(p, 101, R_RECV, 256);
	strcpy(text, "inline-hello");
	ibv_wr_start(x);
	x->wr_id = 2;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_send_imm(x, htobe32(0xabcd));
	ibv_wr_set_inline_data(x, text, 12);
	if (p->ah)
		ibv_wr_set_ud_addr(x, p->ah, p->b->qp_num, 0x11111111);
	memset(text, 'X', sizeof(text));
	check_rc(ibv_wr_complete(x), 0, "  complete");
	ok = wc_line(p->cq_a, "a", 2000, &wc) && wc.wr_id == 2;
	ok = wc_line(p->cq_b, "b", 2000, &wc) && ok && wc.byte_len == g + 12 &&
	     be32toh(wc.imm_data) == 0xabcd &&
	     !memcmp(buf + REMOTE + R_RECV + g, "inline-hello", 12);
	snprintf(line, sizeof(line), "%s send_imm inline", p->name);
	check(ok, line);

	if (p->ah)
		return;

	/* An RDMA WRITE of two SGEs (equal lengths: rdma-core 44's rxe counts
	 * the first one's length num_sge times). */
	memcpy(buf + 128, "first-8-", 8);
	memcpy(buf + 256, "second-8", 8);
	list[0] = (struct ibv_sge){ local(128), 8, mr->lkey };
	list[1] = (struct ibv_sge){ local(256), 8, mr->lkey };
	ibv_wr_start(x);
	x->wr_id = 3;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, mr->rkey, remote(R_WRITE));
	ibv_wr_set_sge_list(x, 2, list);
	check_rc(ibv_wr_complete(x), 0, "  complete");
	ok = wc_line(p->cq_a, "a", 2000, &wc) && wc.opcode == IBV_WC_RDMA_WRITE &&
	     !memcmp(buf + REMOTE + R_WRITE, "first-8-second-8", 16);
	snprintf(line, sizeof(line), "%s rdma_write sge list", p->name);
	check(ok, line);

	/* An RDMA WRITE with immediate data from an inline list. */
	post_recv(p, 102, R_RECV, 256);
	ibv_wr_start(x);
	x->wr_id = 4;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_rdma_write_imm(x, mr->rkey, remote(R_WRITE2), htobe32(7));
	ibv_wr_set_inline_data_list(x, 2, pieces);
	check_rc(ibv_wr_complete(x), 0, "  complete");
	ok = wc_line(p->cq_a, "a", 2000, &wc) && wc.opcode == IBV_WC_RDMA_WRITE;
	ok = wc_line(p->cq_b, "b", 2000, &wc) && ok && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
	     be32toh(wc.imm_data) == 7;
	printf("  remote: \"%.8s\"\n", buf + REMOTE + R_WRITE2);
	snprintf(line, sizeof(line), "%s write_imm inline list", p->name);
	check(ok && !memcmp(buf + REMOTE + R_WRITE2, "abcdefgh", 8), line);

	if (strcmp(p->name, "rc") != 0)
		return;

	/* IBV_SEND_INLINE in wr_flags with an SGE: the SGE's bytes are sent
	 * (the data setter decides, as in mlx5); rdma-core 44's rxe passes the
	 * flag to its kernel, which sends the WQE's SGE descriptor as data. */
	post_recv(p, 103, R_RECV, 256);
	memcpy(buf, "flag-and-sge", 12);
	ibv_wr_start(x);
	x->wr_id = 9;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, mr->lkey, local(0), 12);
	check_rc(ibv_wr_complete(x), 0, "  complete");
	ok = wc_line(p->cq_a, "a", 2000, &wc);
	ok = wc_line(p->cq_b, "b", 2000, &wc) && ok && wc.byte_len == 12;
	check(ok && !memcmp(buf + REMOTE + R_RECV, "flag-and-sge", 12),
	      "rc send sge with IBV_SEND_INLINE in wr_flags");

	/* An RDMA READ. */
	memcpy(buf + REMOTE + R_READ, "read-me-from-the-remote-side!!!", 32);
	ibv_wr_start(x);
	x->wr_id = 5;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_read(x, mr->rkey, remote(R_READ));
	ibv_wr_set_sge(x, mr->lkey, local(512), 32);
	check_rc(ibv_wr_complete(x), 0, "  complete");
	ok = wc_line(p->cq_a, "a", 2000, &wc) && wc.opcode == IBV_WC_RDMA_READ &&
	     !memcmp(buf + 512, "read-me-from-the-remote-side!!!", 32);
	check(ok, "rc rdma_read");

	/* Atomics: compare-and-swap that swaps, one that does not, a fetch-add. */
	*ra = 5;
	ibv_wr_start(x);
	x->wr_id = 6;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_cmp_swp(x, mr->rkey, remote(R_ATOMIC), 5, 9);
	ibv_wr_set_sge(x, mr->lkey, local(64), 8);
	check_rc(ibv_wr_complete(x), 0, "  complete");
	ok = wc_line(p->cq_a, "a", 2000, &wc) && wc.opcode == IBV_WC_COMP_SWAP;
	printf("  old %llu remote %llu\n", (unsigned long long)*old, (unsigned long long)*ra);
	check(ok && *old == 5 && *ra == 9, "rc atomic_cmp_swp swaps");
	ibv_wr_start(x);
	x->wr_id = 7;
	ibv_wr_atomic_cmp_swp(x, mr->rkey, remote(R_ATOMIC), 5, 11);
	ibv_wr_set_sge(x, mr->lkey, local(64), 8);
	check_rc(ibv_wr_complete(x), 0, "  complete");
	ok = wc_line(p->cq_a, "a", 2000, &wc);
	printf("  old %llu remote %llu\n", (unsigned long long)*old, (unsigned long long)*ra);
	check(ok && *old == 9 && *ra == 9, "rc atomic_cmp_swp compares");
	ibv_wr_start(x);
	x->wr_id = 8;
	ibv_wr_atomic_fetch_add(x, mr->rkey, remote(R_ATOMIC), 3);
	ibv_wr_set_sge(x, mr->lkey, local(64), 8);
	check_rc(ibv_wr_complete(x), 0, "  complete");
	ok = wc_line(p->cq_a, "a", 2000, &wc) && wc.opcode == IBV_WC_FETCH_ADD;
	printf("  old %llu remote %llu\n", (unsigned long long)*old, (unsigned long long)*ra);
	check(ok && *old == 9 && *ra == 12, "rc atomic_fetch_add");
}

/* Several requests in one session; an unsignaled one gives no completion. */
static void one_session(struct pair *p)
{
	struct ibv_qp_ex *x = p->xa;
	struct ibv_wc wc;
	char line[200];
	int ok;

	post_recv(p, 200, R_RECV, 64);
	post_recv(p, 201, R_RECV + 64, 64);
	memcpy(buf, "one-two-three-4!", 16);
	ibv_wr_start(x);
	x->wr_id = 10;
	x->wr_flags = 0;
	ibv_wr_send(x);
	if (p->ah)
		ibv_wr_set_ud_addr(x, p->ah, p->b->qp_num, 0x11111111);
	ibv_wr_set_sge(x, mr->lkey, local(0), 4);
	x->wr_id = 11;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(x, htobe32(11));
	ibv_wr_set_sge(x, mr->lkey, local(4), 4);
	if (p->ah)
		ibv_wr_set_ud_addr(x, p->ah, p->b->qp_num, 0x11111111);
	check_rc(ibv_wr_complete(x), 0, "  complete");
	ok = wc_line(p->cq_a, "a", 2000, &wc) && wc.wr_id == 11;
	ok = wc_line(p->cq_b, "b", 2000, &wc) && ok && wc.wr_id == 200;
	ok = wc_line(p->cq_b, "b", 2000, &wc) && ok && wc.wr_id == 201 &&
	     be32toh(wc.imm_data) == 11;
	ok = ok && quiet(p);
	snprintf(line, sizeof(line), "%s two requests in one session, the first unsignaled", p->name);
	check(ok, line);
}

/* ibv_wr_abort, and the errors ibv_wr_complete reports: nothing of a
 * failed session is posted, and the QP goes on working. */
static void aborts_and_errors(struct pair *p)
{
	struct ibv_qp_ex *x = p->xa;
	struct ibv_wc wc;
	struct ibv_sge list[8];
	char line[200], big[4096];
	unsigned int i;
	int ok;

	post_recv(p, 300, R_RECV, 256);
	ibv_wr_start(x);
	x->wr_id = 20;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, mr->lkey, local(0), 8);
	ibv_wr_abort(x);
	snprintf(line, sizeof(line), "%s wr_abort posts nothing", p->name);
	check(quiet(p), line);

	ibv_wr_start(x);
	check_rc(ibv_wr_complete(x), 0, "  an empty session");

	memset(big, 'b', sizeof(big));
	ibv_wr_start(x);
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_send(x);
	if (p->ah)
		ibv_wr_set_ud_addr(x, p->ah, p->b->qp_num, 0x11111111);
	ibv_wr_set_inline_data(x, big, p->cap.max_inline_data + 1);
	snprintf(line, sizeof(line), "%s inline data above max_inline_data", p->name);
	check_rc(ibv_wr_complete(x), ENOSPC, line);

	for (i = 0; i < 8; i++)
		list[i] = (struct ibv_sge){ local(0), 1, mr->lkey };
	ibv_wr_start(x);
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	if (p->ah)
		ibv_wr_set_ud_addr(x, p->ah, p->b->qp_num, 0x11111111);
	ibv_wr_set_sge_list(x, p->cap.max_send_sge + 1, list);
	snprintf(line, sizeof(line), "%s sge list above max_send_sge", p->name);
	check_rc(ibv_wr_complete(x), ENOSPC, line);

	ibv_wr_start(x);
	for (i = 0; i < 1000; i++) {
		x->wr_id = 1000 + i;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(x);
		if (p->ah)
			ibv_wr_set_ud_addr(x, p->ah, p->b->qp_num, 0x11111111);
		ibv_wr_set_sge(x, mr->lkey, local(0), 1);
	}
	snprintf(line, sizeof(line), "%s more requests than the queue holds", p->name);
	check_rc(ibv_wr_complete(x), ENOSPC, line);
	snprintf(line, sizeof(line), "%s failed sessions post nothing", p->name);
	check(quiet(p), line);

	send_one(p, 21, "after");
	ok = wc_line(p->cq_a, "a", 2000, &wc) && wc.wr_id == 21;
	ok = wc_line(p->cq_b, "b", 2000, &wc) && ok && wc.wr_id == 300;
	snprintf(line, sizeof(line), "%s the QP works after them", p->name);
	check(ok, line);
}

static int try_create(enum ibv_qp_type type, uint64_t ops)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp *qp;
	int e;

	errno = 0;
	qp = create_ex(cq, type, ops, NULL);
	e = qp ? 0 : errno;
	if (qp)
		ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	return e;
}

static void creation(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr a = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);

	check(qp && ibv_qp_to_qp_ex(qp) == NULL, "qp_to_qp_ex of an ibv_create_qp QP is NULL");
	if (qp)
		ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	check_rc(try_create(IBV_QPT_RC, 0x7f), 0, "create RC with every RC send op uverbs posts");
	check_rc(try_create(IBV_QPT_UC, 0x0f), 0, "create UC with sends and writes");
	check_rc(try_create(IBV_QPT_UD, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM), 0,
		 "create UD with sends");
	check_rc(try_create(IBV_QPT_UD, IBV_QP_EX_WITH_RDMA_WRITE), EOPNOTSUPP,
		 "create UD with RDMA_WRITE");
	check_rc(try_create(IBV_QPT_UC, IBV_QP_EX_WITH_RDMA_READ), EOPNOTSUPP,
		 "create UC with RDMA_READ");
	check_rc(try_create(IBV_QPT_RC, IBV_QP_EX_WITH_TSO), EOPNOTSUPP, "create RC with TSO");
	/* rxe's sets (rdma-core rxe.c RXE_SUP_RC/UC_QP_SEND_OPS_FLAGS). */
	check_rc(try_create(IBV_QPT_RC,
			    0x7f | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW |
				    IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_ATOMIC_WRITE),
		 0, "create RC with windows, invalidations and atomic writes");
	check_rc(try_create(IBV_QPT_UC,
			    0x0f | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV),
		 0, "create UC with binds and sends with invalidate");
	check_rc(try_create(IBV_QPT_UC, IBV_QP_EX_WITH_LOCAL_INV), EOPNOTSUPP,
		 "create UC with LOCAL_INV");
	check_rc(try_create(IBV_QPT_UC, IBV_QP_EX_WITH_ATOMIC_WRITE), EOPNOTSUPP,
		 "create UC with ATOMIC_WRITE");
}

typedef void (*flush_fn)(struct ibv_qp_ex *, uint32_t, uint64_t, size_t, uint8_t, uint8_t);

/* What only this crate's library answers (see the top of the file). */
static void ours_only(struct pair *p)
{
	static const char *const names[] = { "send_tso", "set_xrc_srqn", "flush",
					     "bind_mw without a window" };
	static const int want[] = { EOPNOTSUPP, EOPNOTSUPP, EOPNOTSUPP, EINVAL };
	struct ibv_qp_ex *x = p->xa;
	struct ibv_mw_bind_info info = { .mr = mr };
	char line[200];
	unsigned int i;

	post_recv(p, 400, R_RECV, 256);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		ibv_wr_start(x);
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(x);
		ibv_wr_set_sge(x, mr->lkey, local(0), 8);
		switch (i) {
		case 0: ibv_wr_send_tso(x, buf, 0, 0); break;
		case 1: ibv_wr_set_xrc_srqn(x, 1); break;
		/* The slot after rdma-core 44's struct. */
		case 2: (*(flush_fn *)(x + 1))(x, mr->rkey, remote(0), 8, 0, 0); break;
		case 3: ibv_wr_bind_mw(x, NULL, 1, &info); break;
		}
		ibv_wr_send(x);
		ibv_wr_set_sge(x, mr->lkey, local(0), 8);
		snprintf(line, sizeof(line), "%s %s fails the session", p->name, names[i]);
		check_rc(ibv_wr_complete(x), want[i], line);
	}
	check(quiet(p), "rc the failed sessions post nothing");
}

int main(int argc, char **argv)
{
	const uint64_t rc_ops_flags = 0x7f, uc_ops_flags = 0x0f;
	struct pair rc, uc, ud;

	setvbuf(stdout, NULL, _IOLBF, 0);
	ctx = open_rxe0();
	check(ctx != NULL, "open rxe0");
	if (!ctx)
		return 1;
	buf = aligned_alloc(4096, LEN);
	memset(buf, 0, LEN);
	pd = ibv_alloc_pd(ctx);
	mr = pd ? ibv_reg_mr(pd, buf, LEN,
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
		: NULL;
	check(mr && !ibv_query_gid(ctx, 1, GID_INDEX, &gid), "PD, MR, GID");
	if (!mr)
		return 1;

	creation();

	check(!make_pair(&rc, "rc", IBV_QPT_RC, rc_ops_flags), "rc pair in RTS");
	rc_ops(&rc);
	one_session(&rc);
	aborts_and_errors(&rc);

	check(!make_pair(&uc, "uc", IBV_QPT_UC, uc_ops_flags), "uc pair in RTS");
	rc_ops(&uc);
	one_session(&uc);

	check(!make_pair(&ud, "ud", IBV_QPT_UD,
			 IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM),
	      "ud pair in RTS");
	rc_ops(&ud);
	one_session(&ud);
	aborts_and_errors(&ud);

	if (argc > 1 && !strcmp(argv[1], "--ours"))
		ours_only(&rc);

	free_pair(&rc);
	free_pair(&uc);
	free_pair(&ud);
	check_rc(ibv_dereg_mr(mr), 0, "dereg_mr");
	check_rc(ibv_dealloc_pd(pd), 0, "dealloc_pd");
	check_rc(ibv_close_device(ctx), 0, "close_device");
	free(buf);
	return failures;
}
