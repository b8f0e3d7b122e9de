/* A process around the verbs: signal handlers, signals during blocking
 * waits, fork, reads with no buffer, a PD its objects still use (issue 39,
 * items 5-9). Each check prints `PASS what` or `FAIL what`; the exit status
 * is the number of FAIL lines.
 *
 * The same binary runs
 * - in the rxe guest on the kernel itself, over rdma-core 44 and over this
 *   crate's libibverbs.so.1 (tests/device/cabi.rs): the kernel is the
 *   oracle of every check;
 * - on the mlx5 device model through the LD_PRELOAD shim of preload/, over
 *   Debian's rdma-core and over ours (scripts/rdma-core-on-model.sh, step
 *   b3): the shim and the model must answer as the kernel does.
 *
 *   process [signals|read-null|eintr|fork|dealloc-pd]...   (none: all)
 *
 * The device is $UVERBS_TEST_DEVICE (else the first), port 1, GID index
 * $UVERBS_TEST_GID_INDEX (else 1); the traffic is an RC QP connected to
 * itself doing signalled RDMA WRITEs on a CQ with a completion channel.
 *
 *   signals:    a SIGALRM handler every 100 us calls write(2), dup(2),
 *               close(2) and a non-blocking read(2) of a completion
 *               channel (all async-signal-safe) while the main thread runs
 *               verbs and traffic for a second: the program ends;
 *   read-null:  read(fd, NULL, 0) of a completion channel and of the async
 *               event fd answers EAGAIN while nothing is queued
 *               (O_NONBLOCK), and EINVAL once an event is queued (a record
 *               does not fit in 0 bytes: ib_uverbs_event_read), which
 *               stays queued; a channel made non-blocking with FIONBIO
 *               reads EAGAIN;
 *   eintr:      a handler without SA_RESTART ends a blocking
 *               ibv_get_cq_event and ibv_get_async_event with -1/EINTR; one
 *               with SA_RESTART does not end ibv_get_cq_event, which
 *               returns the event posted later;
 *   fork:       children forked after the parent used the device (and
 *               while a thread of the parent keeps it busy) open their own
 *               context and complete an RDMA WRITE; the parent's still
 *               works;
 *   dealloc-pd: ibv_dealloc_pd answers EBUSY while a QP, an SRQ, an MR,
 *               an AH (or a memory window, where the device has them)
 *               uses the PD, leaving the PD usable: a second object of
 *               the kind and a region are made from it, and ibv_dealloc_pd
 *               answers EBUSY again (issue 39 item 2: ours answered 0 or
 *               EINVAL there); 0 once they are gone.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define LEN 4096

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

/* An RC QP connected to itself, its CQ on a completion channel, and a
 * buffer whose first half it writes into its second half. */
struct loop {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	char *buf;
};

static int loop_open(struct loop *l, struct ibv_context *ctx)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a;
	union ibv_gid gid;

	memset(l, 0, sizeof(*l));
	l->ctx = ctx;
	l->buf = aligned_alloc(4096, 2 * LEN);
	if (!l->buf)
		return -1;
	memset(l->buf, 0, 2 * LEN);
	l->pd = ibv_alloc_pd(ctx);
	if (!l->pd)
		return -1;
	l->mr = ibv_reg_mr(l->pd, l->buf, 2 * LEN,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	l->ch = ibv_create_comp_channel(ctx);
	if (!l->mr || !l->ch)
		return -1;
	l->cq = ibv_create_cq(ctx, 32, NULL, l->ch, 0);
	if (!l->cq)
		return -1;
	ia.send_cq = ia.recv_cq = l->cq;
	l->qp = ibv_create_qp(l->pd, &ia);
	if (!l->qp || ibv_query_gid(ctx, 1, gid_index, &gid))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (ibv_modify_qp(l->qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = l->qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = gid_index;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(l->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(l->qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static void loop_close(struct loop *l)
{
	if (l->qp)
		ibv_destroy_qp(l->qp);
	if (l->cq)
		ibv_destroy_cq(l->cq);
	if (l->ch)
		ibv_destroy_comp_channel(l->ch);
	if (l->mr)
		ibv_dereg_mr(l->mr);
	if (l->pd)
		ibv_dealloc_pd(l->pd);
	free(l->buf);
	memset(l, 0, sizeof(*l));
}

/* Arms the CQ and posts a signalled RDMA WRITE of `n` bytes of pattern
 * `seed` from the first half of the buffer to the second. */
static int loop_post(struct loop *l, unsigned seed, size_t n)
{
	struct ibv_sge s = { (uintptr_t)l->buf, (uint32_t)n, l->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = seed,
		.sg_list = &s,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { (uintptr_t)l->buf + LEN, l->mr->rkey },
	};
	struct ibv_send_wr *bad;

	for (size_t i = 0; i < n; i++)
		l->buf[i] = (char)(seed + i * 7);
	if (ibv_req_notify_cq(l->cq, 0))
		return -1;
	return ibv_post_send(l->qp, &wr, &bad);
}

/* Waits (blocking) for the completion event of a `loop_post`, polls the
 * completion and compares the bytes; 0 when the write landed. */
static int loop_finish(struct loop *l, unsigned seed, size_t n)
{
	struct ibv_cq *cq;
	void *cq_ctx;
	struct ibv_wc wc;
	int got = 0;

	if (ibv_get_cq_event(l->ch, &cq, &cq_ctx))
		return -1;
	ibv_ack_cq_events(cq, 1);
	for (int tries = 0; tries < 1000000 && got == 0; tries++)
		got = ibv_poll_cq(l->cq, 1, &wc);
	if (got != 1 || wc.status != IBV_WC_SUCCESS || wc.wr_id != seed)
		return -1;
	return memcmp(l->buf, l->buf + LEN, n) ? -1 : 0;
}

static int loop_write(struct loop *l, unsigned seed)
{
	return loop_post(l, seed, 64) || loop_finish(l, seed, 64) ? -1 : 0;
}

static int set_nonblocking(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -1;
	return fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

static void on_signal(int sig, void (*handler)(int), int flags)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

static void timer_us(long first, long every)
{
	struct itimerval t = { { every / 1000000, every % 1000000 },
			       { first / 1000000, first % 1000000 } };

	setitimer(ITIMER_REAL, &t, NULL);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------- signals */

static volatile sig_atomic_t handled, handler_errors;
static int sig_devnull = -1, sig_channel = -1;

static void async_safe_handler(int sig)
{
	int saved = errno;
	char b[64];
	int d;

	(void)sig;
	if (write(sig_devnull, "x", 1) != 1)
		handler_errors++;
	d = dup(sig_devnull);
	if (d < 0 || close(d))
		handler_errors++;
	/* A channel with no CQ: nothing is ever queued on it. */
	if (read(sig_channel, b, sizeof(b)) != -1 || errno != EAGAIN)
		handler_errors++;
	handled++;
	errno = saved;
}

static void signals(struct ibv_context *ctx)
{
	struct ibv_comp_channel *quiet = ibv_create_comp_channel(ctx);
	struct ibv_port_attr pa;
	struct loop l;
	long iterations = 0, writes = 0, bad = 0;
	double end;
	char line[200];

	sig_devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (loop_open(&l, ctx) || !quiet || sig_devnull < 0 || set_nonblocking(quiet->fd, 1)) {
		check(0, "signals: setup");
		return;
	}
	sig_channel = quiet->fd;
	handled = handler_errors = 0;
	on_signal(SIGALRM, async_safe_handler, SA_RESTART);
	timer_us(100, 100);
	end = now() + 1.0;
	while (now() < end) {
		if (write(sig_devnull, "y", 1) != 1 || ibv_query_port(ctx, 1, &pa))
			bad++;
		if (iterations++ % 64 == 0) {
			if (loop_write(&l, (unsigned)iterations))
				bad++;
			writes++;
		}
	}
	timer_us(0, 0);
	signal(SIGALRM, SIG_DFL);
	snprintf(line, sizeof(line), "  (%ld iterations, %ld RDMA WRITEs, %d handler runs)",
		 iterations, writes, (int)handled);
	puts(line);
	check(handled > 10, "signals: a SIGALRM handler calling write, dup, close and read of a "
			    "channel ran while the program ran verbs, and the program went on");
	check(handler_errors == 0, "signals: the handler's calls succeeded (the read: EAGAIN)");
	check(bad == 0, "signals: the verbs and RDMA WRITEs of the main thread succeeded");
	sig_channel = -1;
	close(sig_devnull);
	ibv_destroy_comp_channel(quiet);
	loop_close(&l);
}

/* -------------------------------------------------------------- read-null */

static void read_null(struct ibv_context *ctx)
{
	struct loop l;
	struct ibv_cq *cq;
	void *cq_ctx;
	struct pollfd p;
	ssize_t r;

	if (loop_open(&l, ctx) || set_nonblocking(l.ch->fd, 1) ||
	    set_nonblocking(ctx->async_fd, 1)) {
		check(0, "read-null: setup");
		return;
	}
	errno = 0;
	r = read(l.ch->fd, NULL, 0);
	check(r == -1 && errno == EAGAIN,
	      "read-null: read(channel, NULL, 0) with nothing queued -> EAGAIN");
	errno = 0;
	r = read(ctx->async_fd, NULL, 0);
	check(r == -1 && errno == EAGAIN,
	      "read-null: read(async_fd, NULL, 0) with nothing queued -> EAGAIN");
	{
		/* O_NONBLOCK set with FIONBIO rather than fcntl: the file's flag. */
		char b[64];
		int on = 1, off = 0;

		set_nonblocking(l.ch->fd, 0);
		errno = 0;
		r = ioctl(l.ch->fd, FIONBIO, &on) ? -2 : read(l.ch->fd, b, sizeof(b));
		check(r == -1 && errno == EAGAIN,
		      "read-null: a channel made non-blocking with FIONBIO reads EAGAIN");
		ioctl(l.ch->fd, FIONBIO, &off);
		set_nonblocking(l.ch->fd, 1);
	}
	if (loop_post(&l, 3, 64)) {
		check(0, "read-null: RDMA WRITE posted");
		return;
	}
	p.fd = l.ch->fd;
	p.events = POLLIN;
	check(poll(&p, 1, 10000) == 1, "read-null: the completion event arrives");
	errno = 0;
	r = read(l.ch->fd, NULL, 0);
	check(r == -1 && errno == EINVAL,
	      "read-null: read(channel, NULL, 0) with an event queued -> EINVAL");
	check(set_nonblocking(l.ch->fd, 0) == 0 && ibv_get_cq_event(l.ch, &cq, &cq_ctx) == 0 &&
		      cq == l.cq,
	      "read-null: the event is still queued and read afterwards");
	ibv_ack_cq_events(l.cq, 1);
	set_nonblocking(ctx->async_fd, 0);
	loop_close(&l);
}

/* ------------------------------------------------------------------ eintr */

static volatile sig_atomic_t alarms;

static void count_alarm(int sig)
{
	(void)sig;
	alarms++;
}

struct later {
	struct loop *l;
	long delay_us;
	int rc;
};

static void *post_later(void *arg)
{
	struct later *w = arg;

	usleep(w->delay_us);
	w->rc = loop_post(w->l, 9, 64);
	return NULL;
}

static void eintr(struct ibv_context *ctx)
{
	struct ibv_async_event ev;
	struct later w;
	pthread_t t;
	struct loop l;
	struct ibv_cq *cq;
	void *cq_ctx;
	int r;

	if (loop_open(&l, ctx) || ibv_req_notify_cq(l.cq, 0)) {
		check(0, "eintr: setup");
		return;
	}
	on_signal(SIGALRM, count_alarm, 0);
	alarms = 0;
	timer_us(200000, 0);
	errno = 0;
	r = ibv_get_cq_event(l.ch, &cq, &cq_ctx);
	check(r == -1 && errno == EINTR && alarms == 1,
	      "eintr: a handler without SA_RESTART ends a blocking ibv_get_cq_event: -1/EINTR");
	alarms = 0;
	timer_us(200000, 0);
	errno = 0;
	r = ibv_get_async_event(ctx, &ev);
	check(r == -1 && errno == EINTR && alarms == 1,
	      "eintr: a handler without SA_RESTART ends a blocking ibv_get_async_event: -1/EINTR");

	on_signal(SIGALRM, count_alarm, SA_RESTART);
	alarms = 0;
	w.l = &l;
	w.delay_us = 600000;
	w.rc = -1;
	timer_us(200000, 0);
	if (pthread_create(&t, NULL, post_later, &w)) {
		check(0, "eintr: a thread");
		return;
	}
	r = loop_finish(&l, 9, 64);
	pthread_join(t, NULL);
	check(w.rc == 0 && r == 0 && alarms == 1,
	      "eintr: a handler with SA_RESTART does not end ibv_get_cq_event: the event "
	      "posted later is returned");
	signal(SIGALRM, SIG_DFL);
	loop_close(&l);
}

/* ------------------------------------------------------------------- fork */

static volatile int busy_stop;

static void *keep_busy(void *arg)
{
	struct loop *l = arg;
	unsigned seed = 100;

	while (!busy_stop)
		if (loop_write(l, seed++))
			return (void *)1;
	return NULL;
}

/* The child: its own context, its own traffic; exits 0 when it worked.
 * SIGALRM (default action) ends a child whose RDMA never completes. */
static int child(void)
{
	struct ibv_context *ctx;
	struct loop l;
	int ok;

	alarm(20);
	ctx = open_device();
	if (!ctx)
		return 2;
	ok = !loop_open(&l, ctx) && !loop_write(&l, 7) && !loop_write(&l, 8);
	loop_close(&l);
	if (ibv_close_device(ctx))
		ok = 0;
	return ok ? 0 : 3;
}

static void fork_children(struct ibv_context *ctx)
{
	struct loop l, busy;
	pthread_t t;
	void *busy_rc = NULL;
	int children_ok = 0;
	const int n = 8;

	if (loop_open(&l, ctx) || loop_write(&l, 1) || loop_open(&busy, ctx)) {
		check(0, "fork: setup");
		return;
	}
	busy_stop = 0;
	if (pthread_create(&t, NULL, keep_busy, &busy)) {
		check(0, "fork: a thread");
		return;
	}
	for (int i = 0; i < n; i++) {
		int status = -1;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		if (pid == 0)
			_exit(child());
		if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		    WEXITSTATUS(status) == 0)
			children_ok++;
		else
			printf("  (child %d: status %#x)\n", i, status);
	}
	busy_stop = 1;
	pthread_join(t, &busy_rc);
	check(children_ok == n,
	      "fork: children forked after the parent used the device open their own context "
	      "and complete RDMA WRITEs");
	check(busy_rc == NULL && loop_write(&l, 2) == 0,
	      "fork: the parent's QPs still work after the forks");
	loop_close(&busy);
	loop_close(&l);
}

/* ------------------------------------------------------------- dealloc-pd */

/* One user of `pd` of kind `i` (0 QP, 1 SRQ, 2 MR, 3 AH, 4 memory
 * window), NULL and errno when it cannot be made. */
static void *pd_user(unsigned i, struct ibv_pd *pd, struct ibv_cq *cq, char *buf,
		     union ibv_gid *gid)
{
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = { 1, 1, 1, 1, 0 } };
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				  .grh = { .dgid = *gid, .sgid_index = (uint8_t)gid_index,
					   .hop_limit = 1 } };

	switch (i) {
	case 0: return ibv_create_qp(pd, &qa);
	case 1: return ibv_create_srq(pd, &sa);
	case 2: return ibv_reg_mr(pd, buf, LEN, IBV_ACCESS_LOCAL_WRITE);
	case 3: return ibv_create_ah(pd, &aa);
	default: return ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	}
}

/* Destroys a `pd_user` of kind `i`: 0 or the errno. */
static int pd_user_destroy(unsigned i, void *o)
{
	switch (i) {
	case 0: return ibv_destroy_qp(o);
	case 1: return ibv_destroy_srq(o);
	case 2: return ibv_dereg_mr(o);
	case 3: return ibv_destroy_ah(o);
	default: return ibv_dealloc_mw(o);
	}
}

static void dealloc_pd(struct ibv_context *ctx)
{
	static const char *users[] = { "a QP", "an SRQ", "an MR", "an AH", "a memory window" };
	char *buf = aligned_alloc(4096, LEN);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	union ibv_gid gid;
	char line[300];

	if (!buf || !cq || ibv_query_gid(ctx, 1, gid_index, &gid)) {
		check(0, "dealloc-pd: setup");
		return;
	}
	for (unsigned i = 0; i < sizeof(users) / sizeof(users[0]); i++) {
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		void *user, *second = NULL;
		struct ibv_mr *mr = NULL;
		int busy, again = -1, gone, gone2 = 0, gone_mr = 0, freed;

		if (!pd) {
			check(0, "dealloc-pd: alloc_pd");
			continue;
		}
		user = pd_user(i, pd, cq, buf, &gid);
		if (!user) {
			/* The model has no memory windows. */
			printf("  (skipped %s: %s)\n", users[i], strerror(errno));
			ibv_dealloc_pd(pd);
			continue;
		}
		busy = ibv_dealloc_pd(pd);
		if (busy == EBUSY) {
			/* Still the program's, and usable. */
			second = pd_user(i, pd, cq, buf, &gid);
			mr = ibv_reg_mr(pd, buf, LEN, IBV_ACCESS_LOCAL_WRITE);
			again = ibv_dealloc_pd(pd);
		}
		gone = pd_user_destroy(i, user);
		if (second)
			gone2 = pd_user_destroy(i, second);
		if (mr)
			gone_mr = ibv_dereg_mr(mr);
		freed = busy == EBUSY ? ibv_dealloc_pd(pd) : -1;
		if (busy != EBUSY || !second || !mr || again != EBUSY || gone || gone2 || gone_mr ||
		    freed)
			printf("  (%s: dealloc_pd %d, then made %s and %s, dealloc_pd %d, destroys %d "
			       "%d %d, dealloc_pd %d)\n",
			       users[i], busy, second ? "another" : "none", mr ? "an MR" : "no MR",
			       again, gone, gone2, gone_mr, freed);
		snprintf(line, sizeof(line),
			 "dealloc-pd: EBUSY while %s uses the PD, which stays usable (another one "
			 "and an MR made from it) and EBUSY, 0 once they are destroyed",
			 users[i]);
		check(busy == EBUSY && second && mr && again == EBUSY && gone == 0 && gone2 == 0 &&
			      gone_mr == 0 && freed == 0,
		      line);
	}
	ibv_destroy_cq(cq);
	free(buf);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*run)(struct ibv_context *);
	} steps[] = {
		{ "signals", signals },	      { "read-null", read_null }, { "eintr", eintr },
		{ "fork", fork_children }, { "dealloc-pd", dealloc_pd },
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
