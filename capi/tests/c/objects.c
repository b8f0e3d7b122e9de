/* PDs, MRs, completion channels and CQs through libibverbs' C API, with the
 * return and errno conventions of each call, on rxe0.
 *
 * Built against Debian's <infiniband/verbs.h> and linked against either
 * library, this crate's (-L target/debug) or Debian's (rdma-core 44): both
 * export the same symbol versions (capi/exports.txt), so the binary's
 * imports carry rdma-core's versions (ibv_reg_mr@IBVERBS_1.1) either way:
 *   cc -O1 -Wall -I ~/.cache/uverbs-headers-ibverbs/usr/include \
 *      -o objects capi/tests/c/objects.c -L target/debug -libverbs
 * (An unversioned import would bind, on rdma-core's library, to the oldest
 * definition: the IBVERBS_1.0 compat ibv_reg_mr, whose struct ibv_mr is not
 * verbs.h's.)
 *
 * Run in the rxe guest twice, over this crate's libibverbs.so.1
 * (LD_LIBRARY_PATH) and over rdma-core's: both runs must print the same
 * lines. The exit status is the number of FAIL lines.
 *
 * `objects --ours` adds checks only this crate's library passes: NULL
 * arguments (rdma-core dereferences them) and what uverbs cannot do
 * (another iova, resize; rdma-core's rxe does both). */

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

static int failures;

static void check(int ok, const char *what)
{
	printf("%s %s\n", ok ? "PASS" : "FAIL", what);
	if (!ok)
		failures++;
}

/* A call that must fail with NULL (or -1) and `want` in errno. */
static void check_errno(int failed, int want, const char *what)
{
	int got = errno;
	char line[200];

	snprintf(line, sizeof(line), "%s -> %s", what, strerror(want));
	if (failed && got != want)
		printf("  (errno %d %s)\n", got, strerror(got));
	else if (!failed)
		printf("  (succeeded)\n");
	check(failed && got == want, line);
}

static void check_rc(int rc, int want, const char *what)
{
	char line[200];

	snprintf(line, sizeof(line), "%s -> %d", what, want);
	if (rc != want)
		printf("  (returned %d, errno %d)\n", rc, errno);
	check(rc == want, line);
}

static struct ibv_context *open_rxe0(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int i, num = -1;

	list = ibv_get_device_list(&num);
	if (!list) {
		printf("  (ibv_get_device_list: %s)\n", strerror(errno));
		return NULL;
	}
	for (i = 0; i < num; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "rxe0")) {
			ctx = ibv_open_device(list[i]);
			if (!ctx)
				printf("  (ibv_open_device: %s)\n", strerror(errno));
		}
	ibv_free_device_list(list);
	if (!ctx && !num)
		printf("  (no device)\n");
	return ctx;
}

static void memory_regions(struct ibv_pd *pd, char *buf, size_t len)
{
	struct ibv_mr *mr;
	int access;

	errno = 0;
	mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_REMOTE_WRITE);
	check_errno(!mr, EINVAL, "reg_mr REMOTE_WRITE without LOCAL_WRITE");
	mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE | (1 << 15));
	check_errno(!mr, EINVAL, "reg_mr with an access bit no kernel knows");

	/* Not constant: the header's macro calls ibv_reg_mr_iova2. */
	access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING;
	mr = ibv_reg_mr(pd, buf, len, access);
	check(mr && mr->addr == buf && mr->length == len, "reg_mr with RELAXED_ORDERING (iova2)");
	if (mr)
		check_rc(ibv_dereg_mr(mr), 0, "dereg_mr");

	mr = ibv_reg_mr_iova2(pd, buf, len, 0x1000, IBV_ACCESS_LOCAL_WRITE);
	check(mr && mr->addr == buf && mr->length == len, "reg_mr_iova2 at another iova");
	if (mr)
		check_rc(ibv_dereg_mr(mr), 0, "dereg_mr of the iova region");
	mr = ibv_reg_mr_iova(pd, buf, len, 0x2000, IBV_ACCESS_LOCAL_WRITE);
	check(mr && mr->addr == buf && mr->length == len, "reg_mr_iova at another iova");
	if (mr)
		check_rc(ibv_dereg_mr(mr), 0, "dereg_mr of the iova region");

	mr = ibv_reg_mr_iova2(pd, buf, len, (uintptr_t)buf, IBV_ACCESS_LOCAL_WRITE);
	check(mr != NULL, "reg_mr_iova2 at iova == addr");
	if (!mr)
		return;

	errno = 0;
	check_rc(ibv_rereg_mr(mr, 1 << 3, pd, buf, len, 0), IBV_REREG_MR_ERR_INPUT,
		 "rereg_mr with an unknown flag");
	check(errno == EINVAL, "rereg_mr with an unknown flag sets EINVAL");
	check_rc(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, pd, NULL, len, 0),
		 IBV_REREG_MR_ERR_INPUT, "rereg_mr to a NULL address");
	check_rc(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, IBV_ACCESS_LOCAL_WRITE),
		 IBV_REREG_MR_ERR_INPUT, "rereg_mr access without CHANGE_ACCESS");
	errno = 0;
	/* rxe has no rereg: libibverbs reports the command failed. */
	check_rc(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, pd, NULL, 0,
			      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ),
		 IBV_REREG_MR_ERR_CMD, "rereg_mr CHANGE_ACCESS on rxe");
	check(errno == EOPNOTSUPP, "rereg_mr CHANGE_ACCESS on rxe sets EOPNOTSUPP");
	check(mr->addr == buf && mr->length == len, "the MR is unchanged");
	check_rc(ibv_dereg_mr(mr), 0, "dereg_mr");
}

static void completion_queues(struct ibv_context *ctx)
{
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq, *ev_cq = NULL;
	void *ev_ctx = NULL;
	struct ibv_wc wc[4];
	int flags;

	ch = ibv_create_comp_channel(ctx);
	check(ch && ch->context == ctx && ch->fd >= 0, "create_comp_channel");
	if (!ch)
		return;

	errno = 0;
	cq = ibv_create_cq(ctx, 16, NULL, NULL, ctx->num_comp_vectors + 1);
	check_errno(!cq, EINVAL, "create_cq with comp_vector num_comp_vectors + 1");
	cq = ibv_create_cq(ctx, 16, NULL, NULL, ctx->num_comp_vectors);
	check_errno(!cq, EINVAL, "create_cq with comp_vector num_comp_vectors");
	cq = ibv_create_cq(ctx, 1 << 30, NULL, NULL, 0);
	check_errno(!cq, EINVAL, "create_cq with cqe above max_cqe");
	cq = ibv_create_cq(ctx, 0, NULL, NULL, 0);
	check_errno(!cq, EINVAL, "create_cq with cqe 0");

	cq = ibv_create_cq(ctx, 16, (void *)0x5eed, ch, ctx->num_comp_vectors - 1);
	check(cq && cq->context == ctx && cq->channel == ch && cq->cq_context == (void *)0x5eed &&
		      cq->cqe >= 16,
	      "create_cq with a channel and the last comp_vector");
	if (!cq)
		return;

	check_rc(ibv_destroy_comp_channel(ch), EBUSY, "destroy_comp_channel while a CQ uses it");
	check_rc(ibv_req_notify_cq(cq, 0), 0, "req_notify_cq");
	check_rc(ibv_req_notify_cq(cq, 1), 0, "req_notify_cq solicited only");
	check_rc(ibv_poll_cq(cq, 4, wc), 0, "poll_cq on an empty CQ");

	flags = fcntl(ch->fd, F_GETFL);
	check(fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) == 0, "O_NONBLOCK on the channel fd");
	errno = 0;
	check_rc(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), -1, "get_cq_event on an empty channel");
	check(errno == EAGAIN, "get_cq_event on an empty O_NONBLOCK channel sets EAGAIN");
	ibv_ack_cq_events(cq, 0);

	check(!strcmp(ibv_wc_status_str(IBV_WC_SUCCESS), "success") &&
		      !strcmp(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR), "Work Request Flushed Error") &&
		      !strcmp(ibv_wc_status_str(IBV_WC_REM_ABORT_ERR), "aborted error") &&
		      !strcmp(ibv_wc_status_str(IBV_WC_TM_RNDV_INCOMPLETE), "TM software rendezvous") &&
		      !strcmp(ibv_wc_status_str(99), "unknown"),
	      "wc_status_str");

	check_rc(ibv_destroy_cq(cq), 0, "destroy_cq");
	check_rc(ibv_destroy_comp_channel(ch), 0, "destroy_comp_channel");

	cq = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	check(cq && cq->channel == NULL && cq->cqe >= 1, "create_cq without a channel");
	if (cq)
		check_rc(ibv_destroy_cq(cq), 0, "destroy_cq");
}

/* What only this crate's library answers (see the top of the file). */
static void ours_only(struct ibv_context *ctx, struct ibv_pd *pd, char *buf, size_t len)
{
	struct ibv_cq *cq;
	void *p = NULL;

	errno = 0;
	check_errno(!ibv_alloc_pd(NULL), EINVAL, "alloc_pd(NULL)");
	check_errno(!ibv_reg_mr(NULL, buf, len, IBV_ACCESS_LOCAL_WRITE), EINVAL, "reg_mr(NULL pd)");
	check_rc(ibv_dealloc_pd(NULL), EINVAL, "dealloc_pd(NULL)");
	check_rc(ibv_dereg_mr(NULL), EINVAL, "dereg_mr(NULL)");
	check_errno(!ibv_create_cq(NULL, 1, NULL, NULL, 0), EINVAL, "create_cq(NULL context)");
	check_rc(ibv_destroy_cq(NULL), EINVAL, "destroy_cq(NULL)");
	check_errno(!ibv_create_comp_channel(NULL), EINVAL, "create_comp_channel(NULL)");
	check_rc(ibv_destroy_comp_channel(NULL), EINVAL, "destroy_comp_channel(NULL)");
	check_rc(ibv_get_cq_event(NULL, (struct ibv_cq **)&p, &p), -1, "get_cq_event(NULL)");
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	if (cq) {
		check_rc(ibv_resize_cq(cq, 8), 0, "resize_cq on rxe");
		check(cq->cqe >= 8, "resize_cq grows cq->cqe");
		check_rc(ibv_destroy_cq(cq), 0, "destroy_cq");
	}
}

int main(int argc, char **argv)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	size_t len = 4 * 4096;
	char *buf;

	setvbuf(stdout, NULL, _IOLBF, 0);
	ctx = open_rxe0();
	check(ctx != NULL, "open rxe0");
	if (!ctx)
		return 1;
	buf = aligned_alloc(4096, len);

	pd = ibv_alloc_pd(ctx);
	check(pd && pd->context == ctx, "alloc_pd");
	if (!pd)
		return 1;

	mr = ibv_reg_mr(pd, buf, len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr)
		printf("  (ibv_reg_mr: %s)\n", strerror(errno));
	else if (mr->context != ctx || mr->pd != pd || mr->addr != buf || mr->length != len)
		printf("  (context %p pd %p addr %p length %zu)\n", (void *)mr->context,
		       (void *)mr->pd, mr->addr, mr->length);
	check(mr && mr->context == ctx && mr->pd == pd && mr->addr == buf && mr->length == len,
	      "reg_mr");
	check_rc(ibv_dealloc_pd(pd), EBUSY, "dealloc_pd while an MR uses it");

	memory_regions(pd, buf, len);
	completion_queues(ctx);
	if (argc > 1 && !strcmp(argv[1], "--ours"))
		ours_only(ctx, pd, buf, len);

	if (mr)
		check_rc(ibv_dereg_mr(mr), 0, "dereg_mr");
	check_rc(ibv_dealloc_pd(pd), 0, "dealloc_pd");
	check_rc(ibv_close_device(ctx), 0, "close_device");
	free(buf);
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures;
}
