/* ibv_close_device releases the context's fds whatever objects are alive
 * (issue 39 item 4): libibverbs' verbs_uninit_context (rdma-core 44,
 * libibverbs/device.c) closes the command fd and the async event fd, and
 * the kernel destroys what the program left when it releases the file. A
 * program that opens and closes contexts therefore keeps a flat number of
 * fds; one that leaked two per round ran out after ~500 rounds.
 *
 *   close_device [ROUNDS]     (default 2000)
 *
 * Three runs of ROUNDS open/close rounds: closing cleanly, leaving a PD
 * alive, and leaving a PD, an MR, a CQ and a QP alive. After each, the
 * process has as many fds as before (/proc/self/fd, within 2). Each check
 * prints `PASS what` or `FAIL what`; the exit status is the number of FAIL
 * lines. Run in the rxe guest over rdma-core and over this crate's
 * libibverbs.so.1 (tests/device/cabi.rs): the same checks pass.
 *
 * The device is $UVERBS_TEST_DEVICE, else the first. */
#include <dirent.h>
#include <errno.h>
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

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own fd */
}

enum leftovers { NOTHING, A_PD, OBJECTS };

/* Leaves what `what` says alive on `ctx`; 0 when it was made. */
static int leave_alive(struct ibv_context *ctx, enum leftovers what, void *buf)
{
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC, .cap = { 1, 1, 1, 1, 0 } };
	struct ibv_pd *pd;
	struct ibv_cq *cq;

	if (what == NOTHING)
		return 0;
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		return -1;
	if (what == A_PD)
		return 0;
	cq = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	if (!ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE) || !cq)
		return -1;
	qa.send_cq = qa.recv_cq = cq;
	return ibv_create_qp(pd, &qa) ? 0 : -1;
}

int main(int argc, char **argv)
{
	static const char *names[] = { "closing cleanly", "leaving a PD alive",
				       "leaving a PD, an MR, a CQ and a QP alive" };
	const char *want = getenv("UVERBS_TEST_DEVICE");
	int rounds = argc > 1 ? atoi(argv[1]) : 2000;
	struct ibv_device **list, *dev = NULL;
	char *buf = aligned_alloc(4096, 4096);
	int n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n && !dev; i++)
		if (!want || !*want || !strcmp(ibv_get_device_name(list[i]), want))
			dev = list[i];
	check(dev != NULL && buf != NULL, "a device");
	if (!dev)
		return 1;
	for (int what = NOTHING; what <= OBJECTS; what++) {
		int before = count_fds(), after, done = 0, closed = 0, made = 0;
		char line[200];

		for (; done < rounds; done++) {
			struct ibv_context *ctx = ibv_open_device(dev);

			if (!ctx) {
				printf("  (%s: ibv_open_device failed in round %d: %s)\n", names[what],
				       done, strerror(errno));
				break;
			}
			made += leave_alive(ctx, what, buf) == 0;
			closed += ibv_close_device(ctx) == 0;
		}
		after = count_fds();
		printf("  (%s: %d rounds, %d fds before, %d after)\n", names[what], done, before,
		       after);
		snprintf(line, sizeof(line), "%d contexts opened and closed, %s", rounds,
			 names[what]);
		check(done == rounds && made == rounds && closed == rounds, line);
		snprintf(line, sizeof(line), "as many fds afterwards, %s", names[what]);
		check(before >= 0 && after - before <= 2, line);
	}
	ibv_free_device_list(list);
	free(buf);
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures;
}
