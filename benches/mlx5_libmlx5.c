/*
 * The real-libmlx5 rows of benches/mlx5.sh: Debian's unmodified libibverbs +
 * libmlx5 (rdma-core 44.0-2) posting and polling on uverbs' mlx5 device
 * model, which the preload library (preload/, `scripts/on-model.sh`)
 * serves to this process. The same work as `uverbs perf micro --mlx5-model`
 * and benches/mlx5_baseline.c, through rdma-core's public calls:
 *
 *   lib_write_batchN     ibv_post_send of a list of N RDMA writes (one SGE,
 *                        64 bytes, unsignaled), N = 1, 8, 64;
 *   lib_inline_send      ibv_post_send of one inline SEND (16 bytes);
 *   lib_wr_write_batchN  the same writes through ibv_qp_ex: ibv_wr_start,
 *                        N x (ibv_wr_rdma_write + ibv_wr_set_sge),
 *                        ibv_wr_complete;
 *   lib_wr_inline_send   ibv_wr_start, ibv_wr_send,
 *                        ibv_wr_set_inline_data, ibv_wr_complete;
 *   lib_poll_cqe         ibv_poll_cq, 16 at a time, of requester CQEs (a
 *                        chunk of writes, each completed by a CQE);
 *   lib_cqex_poll_cqe    the same CQEs through the extended CQ: one
 *                        ibv_start_poll .. ibv_end_poll session per chunk,
 *                        reading wr_id, status, opcode, byte_len and
 *                        qp_num of each (ibv_wc_read_*), as the uverbs row
 *                        cqex_poll_cqe reads them;
 *   lib_contended4_write_batch1
 *                        four threads calling ibv_post_send of one RDMA
 *                        write on one QP at once (libmlx5 serialises them
 *                        with the send queue's spinlock, mlx5_spin_lock in
 *                        mlx5_post_send), in rounds of ROUND writes on a
 *                        QP of its own, CDEPTH deep: the threads start
 *                        at a barrier, each posts ROUND / 4, and the round
 *                        runs from the first thread's start to the last
 *                        one's end; then (untimed) one signaled write and
 *                        one injected CQE complete the round. ns per
 *                        write, as uverbs' contended4_write_batch1.
 *
 * Before timing, every kind of work runs once through the model, which
 * executes the WQEs libmlx5 built (the written bytes and each completion
 * are checked; a failure aborts the run). The preload's manual mode
 * (UVERBS_MODEL_HCA=manual) runs the device only when this program calls
 * uverbs_model_process(), a function the preload exports; so during the
 * timed loops the device does nothing behind the program's back, and, as
 * in the C baseline, its part is a completion written into the CQ for the
 * last WQE of each chunk (a copy of the model's own CQE for this QP with
 * the WQE counter and owner bit set), polled outside the timing.
 *
 * Output: one line per measurement, "name ns_per_op". A benchmark: it
 * asserts nothing about speed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <endian.h>
#include <pthread.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHUNK 512u /* work requests per timed chunk, as the other columns */
#define NCQE 4096u /* the CQ's size, as the other columns */

static struct ibv_context *ctx;
static struct ibv_cq *cq;
static struct ibv_cq_ex *cqx; /* the same CQ, made by ibv_create_cq_ex */
static struct ibv_qp *qp;
static struct ibv_qp_ex *qpx;
static struct ibv_mr *mr;
static uint8_t *buf;
static struct mlx5dv_cq dcq;
static struct mlx5dv_qp dqp;
static uint8_t cqe_template[64];
static uint32_t ci;     /* CQEs consumed so far (libmlx5's consumer index) */
static uint32_t posted; /* WQE basic blocks posted so far */
static void (*model_process)(void);

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

/* The model executes what was posted; the completions are polled and checked. */
static void settle(unsigned want)
{
	struct ibv_wc wc[16];
	unsigned got = 0;
	for (int tries = 0; got < want && tries < 1000; tries++) {
		model_process();
		int n = ibv_poll_cq(cq, 16, wc);
		if (n < 0)
			die("ibv_poll_cq");
		for (int i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "the model completed wr %llu with %s\n",
					(unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
				exit(1);
			}
		got += n;
	}
	if (got != want) {
		fprintf(stderr, "the model completed %u of %u requests\n", got, want);
		exit(1);
	}
	ci += got;
}

/* The CQE slot of consumer index k. */
static uint8_t *cqe_at(uint32_t k)
{
	uint8_t *b = dcq.buf;
	return b + (size_t)(k & (dcq.cqe_cnt - 1)) * dcq.cqe_size + dcq.cqe_size - 64;
}

/*
 * The device's part: a requester CQE for the WQE at basic block `counter`,
 * in the slot of consumer index k.
 */
static void inject(uint32_t k, uint32_t counter)
{
	struct mlx5_cqe64 *c = (void *)cqe_at(k);
	uint8_t own = !!(k & dcq.cqe_cnt);
	memcpy(c, cqe_template, 63);
	c->wqe_counter = htobe16(counter & 0xffff);
	__atomic_store_n(&c->op_own, (uint8_t)((MLX5_CQE_REQ << 4) | own), __ATOMIC_RELEASE);
}

/* Completes everything posted: one CQE for the last WQE, polled. */
static void drain(void)
{
	struct ibv_wc wc;
	inject(ci, posted - 1);
	if (ibv_poll_cq(cq, 1, &wc) != 1 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "draining: no successful completion\n");
		exit(1);
	}
	ci++;
}

static int post_writes(int n, uint64_t id, int signaled)
{
	struct ibv_sge sge[64];
	struct ibv_send_wr wr[64], *bad;
	for (int j = 0; j < n; j++) {
		sge[j] = (struct ibv_sge){(uintptr_t)buf, 64, mr->lkey};
		wr[j] = (struct ibv_send_wr){
			.wr_id = id + j,
			.next = j + 1 < n ? &wr[j + 1] : NULL,
			.sg_list = &sge[j],
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = signaled ? IBV_SEND_SIGNALED : 0,
			.wr.rdma = {(uintptr_t)buf + 8192 + 64 * (j % 64), mr->rkey},
		};
	}
	posted += n;
	return ibv_post_send(qp, wr, &bad);
}

static int post_inline(uint64_t id, int signaled)
{
	static const uint8_t data[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
	struct ibv_sge sge = {(uintptr_t)data, sizeof data, 0};
	struct ibv_send_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_INLINE | (signaled ? IBV_SEND_SIGNALED : 0)};
	struct ibv_send_wr *bad;
	posted++;
	return ibv_post_send(qp, &wr, &bad);
}

static int wr_writes(int n, uint64_t id, int signaled)
{
	ibv_wr_start(qpx);
	for (int j = 0; j < n; j++) {
		qpx->wr_id = id + j;
		qpx->wr_flags = signaled ? IBV_SEND_SIGNALED : 0;
		ibv_wr_rdma_write(qpx, mr->rkey, (uintptr_t)buf + 8192 + 64 * (j % 64));
		ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)buf, 64);
	}
	posted += n;
	return ibv_wr_complete(qpx);
}

static int wr_inline(uint64_t id, int signaled)
{
	static const uint8_t data[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
	ibv_wr_start(qpx);
	qpx->wr_id = id;
	qpx->wr_flags = IBV_SEND_INLINE | (signaled ? IBV_SEND_SIGNALED : 0);
	ibv_wr_send(qpx);
	ibv_wr_set_inline_data(qpx, (void *)data, sizeof data);
	posted++;
	return ibv_wr_complete(qpx);
}

static void post_recvs(int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = {(uintptr_t)buf + 32768, 64, mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = 1000 + i, .sg_list = &sge, .num_sge = 1}, *bad;
		if (ibv_post_recv(qp, &wr, &bad))
			die("ibv_post_recv");
	}
}

/*
 * Whether row `name` runs: all of them unless UVERBS_BENCH_ROWS lists some
 * (comma-separated names without the lib_ prefix), as
 * benches/callgrind.sh --cabi runs one row per process.
 */
static int wanted(const char *name)
{
	const char *rows = getenv("UVERBS_BENCH_ROWS");
	if (!rows || !*rows)
		return 1;
	size_t n = strlen(name);
	for (const char *p = rows; (p = strstr(p, name)); p += n)
		if ((p == rows || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
			return 1;
	return 0;
}

/*
 * The timed work of each row, one function each (noinline), so that an
 * instruction count of the function is the row's (benches/callgrind.sh
 * --cabi): a chunk of posts of `batch` writes, a chunk of inline sends, a
 * chunk of requester CQEs polled, and the same through a CQ session.
 */
static __attribute__((noinline)) void write_chunk(int wr, int batch, long done)
{
	for (unsigned k = 0; k + batch <= CHUNK; k += batch) {
		if (wr ? wr_writes(batch, done, 0) : post_writes(batch, done, 0))
			die("post");
		done += batch;
	}
}

static __attribute__((noinline)) void inline_chunk(int wr, long done)
{
	for (unsigned k = 0; k < CHUNK; k++) {
		if (wr ? wr_inline(done, 0) : post_inline(done, 0))
			die("post inline");
		done++;
	}
}

static __attribute__((noinline)) void poll_chunk(void)
{
	struct ibv_wc wc[16];
	unsigned got = 0;
	while (got < CHUNK) {
		int m = ibv_poll_cq(cq, 16, wc);
		if (m < 0)
			die("ibv_poll_cq");
		got += m;
	}
}

static __attribute__((noinline)) uint64_t cqex_chunk(void)
{
	uint64_t sink = 0;
	unsigned got = 0;
	struct ibv_poll_cq_attr pa = {0};
	while (got < CHUNK) {
		if (ibv_start_poll(cqx, &pa))
			continue;
		do {
			sink += cqx->wr_id + cqx->status + ibv_wc_read_opcode(cqx) +
				ibv_wc_read_byte_len(cqx) + ibv_wc_read_qp_num(cqx);
			got++;
		} while (ibv_next_poll(cqx) == 0);
		ibv_end_poll(cqx);
	}
	if (got != CHUNK)
		die("ibv_start_poll: a CQE too many");
	return sink;
}

static void connect_to_self(int gid_index)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, gid_index, &gid))
		die("ibv_query_gid");
	memset(&a, 0, sizeof a);
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
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify to RTR");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify to RTS");
}

/* Every kind of work once through the model, checked. */
static void check_through_the_model(void)
{
	memset(buf, 0xab, 64);
	memset(buf + 8192, 0, 8192);
	if (post_writes(8, 1, 1))
		die("ibv_post_send");
	settle(8);
	for (int j = 0; j < 8; j++)
		if (memcmp(buf + 8192 + 64 * j, buf, 64)) {
			fprintf(stderr, "the model's RDMA write %d left other bytes\n", j);
			exit(1);
		}
	/* The model's own requester CQE for this QP: the template. */
	memcpy(cqe_template, cqe_at(ci - 1), 64);
	if ((cqe_template[63] >> 4) != MLX5_CQE_REQ) {
		fprintf(stderr, "the model's last CQE is not a requester CQE\n");
		exit(1);
	}
	post_recvs(2);
	if (post_inline(9, 1))
		die("ibv_post_send inline");
	settle(2); /* the SEND and its receive */
	if (wr_writes(8, 10, 1))
		die("ibv_wr_complete");
	settle(8);
	if (wr_inline(18, 1))
		die("ibv_wr_complete inline");
	settle(2);
}

/* The contended row: a QP, CQ and their direct views of its own. */
#define CTHREADS 4
#define CDEPTH 8192u
#define ROUND (CDEPTH - 64)
static struct ibv_qp *cqp;
static struct ibv_cq *ccq;
static struct mlx5dv_cq cdcq;
static uint8_t ctemplate[64];
static uint32_t cci, cposted;
static pthread_barrier_t cbar;
static double cstart[CTHREADS], cend[CTHREADS];
static long crounds;
static int cfailed;

static int post_one_write(struct ibv_qp *q, uint64_t id, int signaled)
{
	struct ibv_sge sge = {(uintptr_t)buf, 64, mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = signaled ? IBV_SEND_SIGNALED : 0,
				 .wr.rdma = {(uintptr_t)buf + 4096, mr->rkey}};
	struct ibv_send_wr *bad;
	return ibv_post_send(q, &wr, &bad);
}

static __attribute__((noinline)) void contended_share(void)
{
	for (unsigned i = 0; i < ROUND / CTHREADS; i++)
		if (post_one_write(cqp, i, 0))
			__atomic_store_n(&cfailed, 1, __ATOMIC_RELAXED);
}

static void *contender(void *arg)
{
	long t = (long)arg;
	for (long r = 0; r < crounds; r++) {
		pthread_barrier_wait(&cbar);
		cstart[t] = now_ns();
		contended_share();
		cend[t] = now_ns();
		pthread_barrier_wait(&cbar);
	}
	return NULL;
}

/* The contended QP's completion of everything posted: one CQE, polled. */
static void cdrain(void)
{
	struct mlx5_cqe64 *c = (void *)((uint8_t *)cdcq.buf +
		(size_t)(cci & (cdcq.cqe_cnt - 1)) * cdcq.cqe_size + cdcq.cqe_size - 64);
	uint8_t own = !!(cci & cdcq.cqe_cnt);
	struct ibv_wc wc;
	memcpy(c, ctemplate, 63);
	c->wqe_counter = htobe16((cposted - 1) & 0xffff);
	__atomic_store_n(&c->op_own, (uint8_t)((MLX5_CQE_REQ << 4) | own), __ATOMIC_RELEASE);
	if (ibv_poll_cq(ccq, 1, &wc) != 1 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "contended: draining found no successful completion\n");
		exit(1);
	}
	cci++;
}

static void contended(struct ibv_pd *pd, int gid_index, long iters)
{
	ccq = ibv_create_cq(ctx, NCQE, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = {
		.send_cq = ccq, .recv_cq = ccq, .qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = CDEPTH, .max_recv_wr = 16, .max_send_sge = 1,
			.max_recv_sge = 1},
	};
	if (!ccq || !(cqp = ibv_create_qp(pd, &ia)))
		die("contended: ibv_create_cq / ibv_create_qp");
	struct ibv_qp *saved = qp;
	qp = cqp;
	connect_to_self(gid_index);
	qp = saved;
	struct mlx5dv_obj o = {.cq = {ccq, &cdcq}};
	if (mlx5dv_init_obj(&o, MLX5DV_OBJ_CQ))
		die("contended: mlx5dv_init_obj");
	/* Once through the model, the CQE template from its completion. */
	if (post_one_write(cqp, 1, 1))
		die("contended: ibv_post_send");
	struct ibv_wc wc;
	int got = 0;
	for (int tries = 0; !got && tries < 1000; tries++) {
		model_process();
		got = ibv_poll_cq(ccq, 1, &wc);
	}
	if (got != 1 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "contended: the model did not complete the write\n");
		exit(1);
	}
	cci = 1;
	cposted = 1;
	memcpy(ctemplate, (uint8_t *)cdcq.buf + cdcq.cqe_size - 64, 64);

	crounds = (iters + ROUND - 1) / ROUND;
	pthread_t th[CTHREADS];
	pthread_barrier_init(&cbar, NULL, CTHREADS + 1);
	for (long t = 0; t < CTHREADS; t++)
		if (pthread_create(&th[t], NULL, contender, (void *)t))
			die("pthread_create");
	double total = 0;
	for (long r = 0; r < crounds; r++) {
		pthread_barrier_wait(&cbar);
		pthread_barrier_wait(&cbar);
		double s = cstart[0], e = cend[0];
		for (int t = 1; t < CTHREADS; t++) {
			s = cstart[t] < s ? cstart[t] : s;
			e = cend[t] > e ? cend[t] : e;
		}
		total += e - s;
		if (post_one_write(cqp, 2, 1))
			die("contended: the round's last write");
		cposted += ROUND / CTHREADS * CTHREADS + 1;
		cdrain();
	}
	for (int t = 0; t < CTHREADS; t++)
		pthread_join(th[t], NULL);
	if (cfailed) {
		fprintf(stderr, "contended: a post failed\n");
		exit(1);
	}
	printf("lib_contended%d_write_batch1 %.2f\n", CTHREADS,
	       total / (crounds * (ROUND / CTHREADS) * CTHREADS));
	ibv_destroy_qp(cqp);
	ibv_destroy_cq(ccq);
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 2000000;
	const char *g = getenv("UVERBS_BENCH_GID");
	int gid_index = g ? atoi(g) : 1;
	model_process = (void (*)(void))dlsym(RTLD_DEFAULT, "uverbs_model_process");
	if (!model_process) {
		fprintf(stderr, "run me under scripts/on-model.sh with UVERBS_MODEL_HCA=manual\n");
		return 2;
	}
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1)
		die("ibv_get_device_list");
	ctx = ibv_open_device(list[0]);
	if (!ctx)
		die("ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	buf = aligned_alloc(4096, 65536);
	if (!pd || !buf)
		die("ibv_alloc_pd");
	mr = ibv_reg_mr(pd, buf, 65536,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	struct ibv_cq_init_attr_ex ca = {
		.cqe = NCQE,
		.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM,
	};
	cqx = ibv_create_cq_ex(ctx, &ca);
	if (!mr || !cqx)
		die("ibv_reg_mr / ibv_create_cq_ex");
	cq = ibv_cq_ex_to_cq(cqx);
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 2 * CHUNK, .max_recv_wr = 16, .max_send_sge = 1,
			.max_recv_sge = 1, .max_inline_data = 44},
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND,
	};
	qp = ibv_create_qp_ex(ctx, &ia);
	if (!qp)
		die("ibv_create_qp_ex");
	qpx = ibv_qp_to_qp_ex(qp);
	connect_to_self(gid_index);
	struct mlx5dv_obj o = {.qp = {qp, &dqp}, .cq = {cq, &dcq}};
	if (mlx5dv_init_obj(&o, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ))
		die("mlx5dv_init_obj");
	check_through_the_model();
	if (wanted("contended4_write_batch1"))
		contended(pd, gid_index, iters);

	static const int batches[] = {1, 8, 64};
	for (int post_kind = 0; post_kind < 2; post_kind++) {
		const char *prefix = post_kind ? "lib_wr_" : "lib_";
		for (unsigned b = 0; b < 3; b++) {
			int batch = batches[b];
			char name[32];
			snprintf(name, sizeof name, "%swrite_batch%d", prefix + 4, batch);
			if (!wanted(name))
				continue;
			double t = 0;
			long done = 0;
			while (done < iters) {
				double t0 = now_ns();
				write_chunk(post_kind, batch, done);
				done += CHUNK - CHUNK % batch;
				t += now_ns() - t0;
				drain();
			}
			printf("%swrite_batch%d %.2f\n", prefix, batch, t / done);
		}
		if (!wanted(post_kind ? "wr_inline_send" : "inline_send"))
			continue;
		double t = 0;
		long done = 0;
		while (done < iters) {
			double t0 = now_ns();
			inline_chunk(post_kind, done);
			done += CHUNK;
			t += now_ns() - t0;
			drain();
		}
		printf("%sinline_send %.2f\n", prefix, t / done);
	}
	if (wanted("poll_cqe")) {
		double t = 0;
		long done = 0;
		while (done < iters) {
			/* A chunk of writes, each completed by a CQE (untimed), then polled. */
			for (unsigned k = 0; k < CHUNK; k += 64)
				if (post_writes(64, 0, 0))
					die("post");
			for (unsigned j = 0; j < CHUNK; j++)
				inject(ci + j, posted - CHUNK + j);
			double t0 = now_ns();
			poll_chunk();
			t += now_ns() - t0;
			ci += CHUNK;
			done += CHUNK;
		}
		printf("lib_poll_cqe %.2f\n", t / done);
	}
	if (wanted("cqex_poll_cqe")) {
		double t = 0;
		long done = 0;
		uint64_t sink = 0;
		while (done < iters) {
			for (unsigned k = 0; k < CHUNK; k += 64)
				if (post_writes(64, 0, 0))
					die("post");
			for (unsigned j = 0; j < CHUNK; j++)
				inject(ci + j, posted - CHUNK + j);
			double t0 = now_ns();
			sink += cqex_chunk();
			t += now_ns() - t0;
			ci += CHUNK;
			done += CHUNK;
		}
		printf("lib_cqex_poll_cqe %.2f\n", t / done);
		if (sink == 42)
			printf("\n");
	}
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
