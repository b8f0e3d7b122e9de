/* Refused destroys and the completions of a destroyed QP (issue 39, items
 * 1 and 3). Each check prints `PASS what` or `FAIL what`; the exit status
 * is the number of FAIL lines.
 *
 * The same binary runs
 * - in the rxe guest on the kernel itself, over rdma-core 44 and over this
 *   crate's libibverbs.so.1 (tests/device/cabi.rs);
 * - on the mlx5 device model through the LD_PRELOAD shim of preload/, over
 *   Debian's libibverbs + libmlx5 and over ours
 *   (scripts/rdma-core-on-model.sh, step b4).
 * Both libraries must pass the same checks, with the same text: a check's
 * line says what the library did where providers differ (libmlx5 removes
 * the completions of a destroyed or reset QP from its CQ, rdma-core's rxe
 * leaves them), so the lines compare ours with rdma-core's provider.
 *
 *   destroy [dereg-mw|refused|stale-destroy|stale-reset|stale-poll]...
 *
 *   dereg-mw:      (where the device has memory windows: rxe) a region
 *                  under a bound type 1 window: ibv_dereg_mr answers
 *                  EINVAL (rxe_dereg_mr) and leaves the region registered
 *                  (the window's key still writes into it) and the C
 *                  object usable; again EINVAL; after ibv_dealloc_mw it
 *                  deregisters, and the PD deallocates;
 *   refused:       (under the device model's shim: its
 *                  uverbs_model_refuse_destroys hook) ibv_dereg_mr,
 *                  ibv_destroy_ah and ibv_dealloc_pd refused by the kernel
 *                  (EBUSY) leave their objects usable (an RDMA WRITE from
 *                  the region, a region registered in the PD, the AH's
 *                  fields), and the retries succeed;
 *   stale-destroy: QP A's completions are in the CQ (an ibv_cq_ex), a
 *                  session takes the first, QP A is destroyed, QP B
 *                  completes work: the sessions after the destroy return
 *                  all of B's and, on mlx5, none of A's (libmlx5's
 *                  __mlx5_cq_clean);
 *   stale-reset:   the same with QP A reset (RESET) instead, then brought
 *                  back to RTS: its new completions are all returned, its
 *                  old ones (on mlx5) none;
 *   stale-poll:    stale-destroy with ibv_poll_cq after the destroy.
 *
 * The device is $UVERBS_TEST_DEVICE (else the first), port 1, GID index
 * $UVERBS_TEST_GID_INDEX (else 1).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define LEN 4096
/* Writes per QP in the stale steps. */
#define WRITES 4

static int failures;
static int gid_index = 1;

static void check(int ok, const char *what)
{
	printf("%s %s\n", ok ? "PASS" : "FAIL", what);
	if (!ok)
		failures++;
}

static struct ibv_context *open_device(void)
{
	const char *want = getenv("UVERBS_TEST_DEVICE");
	struct ibv_context *ctx = NULL;
	struct ibv_device **l;
	int n;

	l = ibv_get_device_list(&n);
	if (!l)
		return NULL;
	for (int i = 0; i < n && !ctx; i++)
		if (!want || !*want || !strcmp(ibv_get_device_name(l[i]), want))
			ctx = ibv_open_device(l[i]);
	ibv_free_device_list(l);
	return ctx;
}

/* Whether the provider removes a destroyed or reset QP's completions from
 * its CQs: libmlx5 does (__mlx5_cq_clean), rdma-core's rxe does not. */
static int provider_cleans(struct ibv_context *ctx)
{
	return !strncmp(ibv_get_device_name(ctx->device), "mlx5", 4);
}

/* RESET -> INIT -> RTR -> RTS, connected to itself through GID
 * `gid_index`, remote writes allowed. */
static int connect_self(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	union ibv_gid gid;

	if (ibv_query_gid(qp->context, 1, gid_index, &gid))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = gid_index;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static struct ibv_qp *rc_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	if (qp && connect_self(qp)) {
		ibv_destroy_qp(qp);
		return NULL;
	}
	return qp;
}

/* Posts a signalled RDMA WRITE of 8 bytes of `seed` from `src` (in region
 * `lkey`) to `dst` with `rkey`. */
static int write8(struct ibv_qp *qp, char *src, uint32_t lkey, char *dst, uint32_t rkey,
		  uint64_t seed)
{
	struct ibv_sge s = { (uintptr_t)src, 8, lkey };
	struct ibv_send_wr wr = {
		.wr_id = seed,
		.sg_list = &s,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { (uintptr_t)dst, rkey },
	};
	struct ibv_send_wr *bad;

	memcpy(src, &seed, 8);
	return ibv_post_send(qp, &wr, &bad);
}

/* Waits until the 8 bytes at `dst` are `seed` (the write landed), then a
 * while longer for its completion to be written (up to 5 s in all). */
static int landed(const char *dst, uint64_t seed)
{
	for (int i = 0; i < 50000; i++) {
		uint64_t v;

		memcpy(&v, (const void *)dst, 8);
		if (v == seed) {
			usleep(100000);
			return 0;
		}
		usleep(100);
	}
	return -1;
}

/* The next completion of `cq` by ibv_poll_cq, waiting up to 5 s; 0 with
 * `*wc` written, -1 when none came. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (int i = 0; i < 50000; i++) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n == 1 ? 0 : -1;
		usleep(100);
	}
	return -1;
}

/* ------------------------------------------------------------- dereg-mw */

static void dereg_mw(struct ibv_context *ctx)
{
	char *buf = aligned_alloc(4096, 2 * LEN);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_mr *src = NULL, *target = NULL;
	struct ibv_qp *qp = NULL;
	struct ibv_mw *mw = NULL;
	struct ibv_mw_bind bind;
	struct ibv_wc wc;
	uint32_t lkey, rkey;
	int first, kept, again, bound_write, gone_mw, gone, freed;

	if (!buf || !pd || !cq) {
		check(0, "dereg-mw: setup");
		return;
	}
	memset(buf, 0, 2 * LEN);
	mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	if (!mw) {
		printf("  (skipped dereg-mw: ibv_alloc_mw: %s)\n", strerror(errno));
		ibv_destroy_cq(cq);
		ibv_dealloc_pd(pd);
		free(buf);
		return;
	}
	src = ibv_reg_mr(pd, buf, LEN, IBV_ACCESS_LOCAL_WRITE);
	target = ibv_reg_mr(pd, buf + LEN, LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	qp = rc_qp(pd, cq);
	if (!src || !target || !qp) {
		check(0, "dereg-mw: setup");
		return;
	}
	memset(&bind, 0, sizeof(bind));
	bind.wr_id = 1;
	bind.send_flags = IBV_SEND_SIGNALED;
	bind.bind_info.mr = target;
	bind.bind_info.addr = (uintptr_t)buf + LEN;
	bind.bind_info.length = 256;
	bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (ibv_bind_mw(qp, mw, &bind) || poll_one(cq, &wc) || wc.status != IBV_WC_SUCCESS) {
		check(0, "dereg-mw: bind a type 1 window to the region");
		return;
	}
	lkey = target->lkey;
	rkey = target->rkey;
	first = ibv_dereg_mr(target);
	/* Read now: the last ibv_dereg_mr below frees it. */
	kept = lkey == target->lkey && rkey == target->rkey && target->pd == pd;
	/* Still registered: the window's key writes into it. */
	bound_write = write8(qp, buf, src->lkey, buf + LEN + 8, mw->rkey, 0x1122334455667788) ||
		      poll_one(cq, &wc) || wc.status != IBV_WC_SUCCESS ||
		      landed(buf + LEN + 8, 0x1122334455667788);
	again = ibv_dereg_mr(target);
	gone_mw = ibv_dealloc_mw(mw);
	gone = ibv_dereg_mr(target);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(src);
	ibv_destroy_cq(cq);
	freed = ibv_dealloc_pd(pd);
	if (first != EINVAL || again != EINVAL || bound_write || gone_mw || gone || freed)
		printf("  (dereg %d, write %d, dereg %d, dealloc_mw %d, dereg %d, dealloc_pd %d)\n",
		       first, bound_write, again, gone_mw, gone, freed);
	check(first == EINVAL && kept,
	      "dereg-mw: ibv_dereg_mr of a region under a bound window answers EINVAL, the region "
	      "as it was");
	check(bound_write == 0, "dereg-mw: the refused region stays registered: the window's key "
				"writes into it");
	check(again == EINVAL, "dereg-mw: ibv_dereg_mr again answers EINVAL");
	check(gone_mw == 0 && gone == 0,
	      "dereg-mw: once the window is deallocated, ibv_dereg_mr deregisters it");
	check(freed == 0, "dereg-mw: and the PD deallocates");
	free(buf);
}

/* -------------------------------------------------------------- refused */

static void refused(struct ibv_context *ctx)
{
	void (*refuse)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "uverbs_model_refuse_destroys");
	char *buf = aligned_alloc(4096, 2 * LEN);
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *spare = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_mr *mr = NULL, *dst = NULL, *in_spare;
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	struct ibv_ah *ah = NULL;
	struct ibv_qp *qp = NULL;
	struct ibv_wc wc;
	uint32_t ah_handle, spare_handle;
	int rc_mr, rc_ah, rc_pd, ah_kept, used, made, gone_mr, gone_ah, gone_pd;

	if (!refuse) {
		printf("  (skipped refused: no device model to refuse destroys)\n");
		ibv_destroy_cq(cq);
		ibv_dealloc_pd(spare);
		ibv_dealloc_pd(pd);
		free(buf);
		return;
	}
	if (!buf || !pd || !spare || !cq || ibv_query_gid(ctx, 1, gid_index, &aa.grh.dgid)) {
		check(0, "refused: setup");
		return;
	}
	memset(buf, 0, 2 * LEN);
	aa.grh.sgid_index = (uint8_t)gid_index;
	aa.grh.hop_limit = 1;
	mr = ibv_reg_mr(pd, buf, LEN, IBV_ACCESS_LOCAL_WRITE);
	dst = ibv_reg_mr(pd, buf + LEN, LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ah = ibv_create_ah(pd, &aa);
	qp = rc_qp(pd, cq);
	if (!mr || !dst || !ah || !qp) {
		check(0, "refused: setup");
		return;
	}
	ah_handle = ah->handle;
	spare_handle = spare->handle;
	refuse(1);
	rc_mr = ibv_dereg_mr(mr);
	rc_ah = ibv_destroy_ah(ah);
	/* Read now: the retry below frees it. */
	ah_kept = ah_handle == ah->handle && ah->pd == pd && ah->context == ctx;
	rc_pd = ibv_dealloc_pd(spare);
	refuse(0);
	used = write8(qp, buf, mr->lkey, buf + LEN, dst->rkey, 0x0102030405060708) ||
	       poll_one(cq, &wc) || wc.status != IBV_WC_SUCCESS ||
	       landed(buf + LEN, 0x0102030405060708);
	in_spare = ibv_reg_mr(spare, buf, LEN, IBV_ACCESS_LOCAL_WRITE);
	made = in_spare && spare->handle == spare_handle && !ibv_dereg_mr(in_spare);
	ibv_destroy_qp(qp);
	gone_mr = ibv_dereg_mr(mr);
	gone_ah = ibv_destroy_ah(ah);
	gone_pd = ibv_dealloc_pd(spare);
	ibv_dereg_mr(dst);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	free(buf);
	check(rc_mr == EBUSY && used == 0,
	      "refused: ibv_dereg_mr refused (EBUSY) leaves the region usable (an RDMA WRITE from it)");
	check(rc_ah == EBUSY && ah_kept,
	      "refused: ibv_destroy_ah refused (EBUSY) leaves the AH as it was");
	check(rc_pd == EBUSY && made,
	      "refused: ibv_dealloc_pd refused (EBUSY) leaves the PD usable (a region registered in it)");
	check(gone_mr == 0 && gone_ah == 0 && gone_pd == 0,
	      "refused: the retries deregister, destroy and deallocate them");
}

/* --------------------------------------------------------------- stale */

enum stale_how { STALE_DESTROY, STALE_RESET, STALE_POLL };

/* What the CQ returned after QP A went: counts by kind of wr_id. */
struct seen {
	int old_a;  /* A's writes 2..WRITES, from before it went */
	int new_a;  /* A's writes after a reset */
	int b;      /* B's writes */
	int other;  /* anything else, or a failed completion */
	int twice;  /* returned more than once */
	unsigned mask; /* which were returned */
};

static void saw(struct seen *s, uint64_t wr_id, int status)
{
	unsigned bit;

	if (status != IBV_WC_SUCCESS) {
		s->other++;
		return;
	}
	if (wr_id >= 0xa1 && wr_id < 0xa0 + WRITES) {
		s->old_a++;
		bit = (unsigned)(wr_id - 0xa0);
	} else if (wr_id >= 0xb0 && wr_id < 0xb0 + WRITES) {
		s->b++;
		bit = 8 + (unsigned)(wr_id - 0xb0);
	} else if (wr_id >= 0xc0 && wr_id < 0xc0 + WRITES) {
		s->new_a++;
		bit = 16 + (unsigned)(wr_id - 0xc0);
	} else {
		s->other++;
		return;
	}
	if (s->mask & (1u << bit))
		s->twice++;
	s->mask |= 1u << bit;
}

/* Takes the CQ's completions with sessions (or ibv_poll_cq) until `b` of
 * B's and `new_a` of A's new ones came, or 5 s passed. */
static void drain(struct ibv_cq_ex *cq, int by_poll, int b, int new_a, struct seen *s)
{
	for (int i = 0; i < 50000 && (s->b < b || s->new_a < new_a); i++) {
		struct ibv_poll_cq_attr attr = {};
		struct ibv_wc wc[8];
		int n;

		if (by_poll) {
			n = ibv_poll_cq(ibv_cq_ex_to_cq(cq), 8, wc);
			for (int k = 0; k < n; k++)
				saw(s, wc[k].wr_id, wc[k].status);
		} else if (ibv_start_poll(cq, &attr) == 0) {
			do
				saw(s, cq->wr_id, cq->status);
			while (ibv_next_poll(cq) == 0);
			ibv_end_poll(cq);
			continue;
		}
		usleep(100);
	}
}

static void stale(struct ibv_context *ctx, enum stale_how how)
{
	static const char *names[] = { "stale-destroy", "stale-reset", "stale-poll" };
	static const char *gone[] = { "destroy", "reset", "destroy" };
	const char *name = names[how];
	struct ibv_cq_init_attr_ex ca = { .cqe = 64, .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct ibv_poll_cq_attr attr = {};
	char *buf = aligned_alloc(4096, 2 * LEN);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &ca);
	struct ibv_qp *a = NULL, *b = NULL;
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
	struct ibv_mr *mr = NULL;
	struct seen s = { 0 };
	uint64_t first = 0;
	int cleans = provider_cleans(ctx), posted = 0, went;
	int new_a = how == STALE_RESET ? WRITES : 0;
	char line[300];

	if (buf && pd)
		mr = ibv_reg_mr(pd, buf, 2 * LEN,
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (mr && cq) {
		a = rc_qp(pd, ibv_cq_ex_to_cq(cq));
		b = rc_qp(pd, ibv_cq_ex_to_cq(cq));
	}
	if (!a || !b) {
		check(0, "stale: setup");
		return;
	}
	memset(buf, 0, 2 * LEN);
	/* A's completions in the CQ; a session takes the first. */
	for (int i = 0; i < WRITES; i++)
		posted |= write8(a, buf + 8 * i, mr->lkey, buf + LEN + 8 * i, mr->rkey, 0xa0 + i);
	posted |= landed(buf + LEN + 8 * (WRITES - 1), 0xa0 + WRITES - 1);
	for (int i = 0; i < 50000 && !posted; i++) {
		if (ibv_start_poll(cq, &attr) == 0) {
			first = cq->wr_id;
			ibv_end_poll(cq);
			break;
		}
		usleep(100);
	}
	went = how == STALE_RESET ? ibv_modify_qp(a, &reset, IBV_QP_STATE) : ibv_destroy_qp(a);
	if (how == STALE_RESET) {
		/* Back to work: its new completions must all come. */
		went |= connect_self(a);
		for (int i = 0; i < WRITES; i++)
			posted |= write8(a, buf + 64 + 8 * i, mr->lkey, buf + LEN + 64 + 8 * i,
					 mr->rkey, 0xc0 + i);
	}
	for (int i = 0; i < WRITES; i++)
		posted |= write8(b, buf + 128 + 8 * i, mr->lkey, buf + LEN + 128 + 8 * i, mr->rkey,
				 0xb0 + i);
	posted |= landed(buf + LEN + 128 + 8 * (WRITES - 1), 0xb0 + WRITES - 1);
	drain(cq, how == STALE_POLL, WRITES, new_a, &s);
	if (how == STALE_RESET)
		ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	ibv_dealloc_pd(pd);
	free(buf);
	if (posted || went || first != 0xa0 || s.other || s.twice || s.b != WRITES ||
	    s.new_a != new_a || (cleans && s.old_a))
		printf("  (%s: posted %d, %s %d, first %#llx; after: %d of A's old, %d new, %d of "
		       "B's, %d other, %d twice)\n",
		       name, posted, gone[how], went, (unsigned long long)first, s.old_a, s.new_a,
		       s.b, s.other, s.twice);
	check(!posted && !went && first == 0xa0, name);
	snprintf(line, sizeof(line),
		 "%s: after QP A's %s, %s %s of its completions a session left, all of "
		 "QP B's%s, none twice",
		 name, gone[how], how == STALE_POLL ? "ibv_poll_cq returns" : "the sessions return",
		 s.old_a ? "the rest" : "none", how == STALE_RESET ? " and all of A's new ones" : "");
	check(!s.other && !s.twice && s.b == WRITES && s.new_a == new_a &&
		      (s.old_a == 0 || s.old_a == WRITES - 1) && !(cleans && s.old_a),
	      line);
}

static void stale_destroy(struct ibv_context *ctx)
{
	stale(ctx, STALE_DESTROY);
}

static void stale_reset(struct ibv_context *ctx)
{
	stale(ctx, STALE_RESET);
}

static void stale_poll(struct ibv_context *ctx)
{
	stale(ctx, STALE_POLL);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*run)(struct ibv_context *);
	} steps[] = {
		{ "dereg-mw", dereg_mw },	    { "refused", refused },
		{ "stale-destroy", stale_destroy }, { "stale-reset", stale_reset },
		{ "stale-poll", stale_poll },
	};
	const char *g = getenv("UVERBS_TEST_GID_INDEX");
	struct ibv_context *ctx;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (g && *g)
		gid_index = atoi(g);
	ctx = open_device();
	check(ctx != NULL, "open the device");
	if (!ctx)
		return 1;
	for (unsigned i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		int wanted = argc < 2;

		for (int a = 1; a < argc; a++)
			wanted |= !strcmp(argv[a], steps[i].name);
		if (wanted)
			steps[i].run(ctx);
	}
	check(ibv_close_device(ctx) == 0, "close the device");
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures;
}
