/*
 * The C baseline of benches/mlx5.sh: the mlx5 data path's work written with
 * rdma-core's public mlx5dv.h helpers, in host memory, the way rdma-core's
 * providers/mlx5 does it (qp.c _mlx5_post_send + post_send_db, cq.c
 * mlx5_parse_cqe), so `uverbs perf micro --mlx5-model` can be compared with
 * it in one run. Not linked into anything; compiled by the bench script.
 *
 * Per posted WQE: the ctrl, remote-address and data segments (or an inline
 * segment), the work-request id bookkeeping, the queue-full check; per
 * batch: the to-device barrier, the doorbell record, sfence, the 8-byte
 * doorbell store (BlueFlame: 64 bytes of ascending 8-byte stores for one
 * inline WQE), sfence. Per CQE: the ownership check, lfence, the fields an
 * ibv_wc gets. The "UAR" is a page of ordinary memory.
 *
 * Output: one line per measurement, "name ns_per_op".
 */
#include <infiniband/mlx5dv.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SQ_WQEBB 1024u /* 64 KiB of send queue */
#define MAX_POST 512u  /* 128-byte WQEs */
#define NCQE 4096u

struct wc {
	uint64_t wr_id;
	uint32_t status, opcode, vendor_err, byte_len, imm, qp_num, src_qp;
	uint32_t flags;
	uint16_t pkey, slid;
	uint8_t sl, path;
};

static uint8_t *sq;
static volatile uint32_t dbrec[2];
static uint8_t *uar;
static uint64_t wrid[SQ_WQEBB];
static uint32_t wqe_head[SQ_WQEBB];
static uint32_t cur_post, head, tail, bf_offset;
static const uint32_t qpn = 0x1234;

static inline void compiler_barrier(void) { asm volatile("" ::: "memory"); }
static inline void sfence(void) { asm volatile("sfence" ::: "memory"); }
static inline void lfence(void) { asm volatile("lfence" ::: "memory"); }

static inline uint8_t *wqe_at(uint32_t bb) { return sq + (bb & (SQ_WQEBB - 1)) * 64; }

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

/* One RDMA write WQE with one SGE; returns 0 or -1 (queue full). */
static inline int post_write(uint64_t id, uint64_t laddr, uint32_t lkey, uint32_t len,
			     uint64_t raddr, uint32_t rkey, struct mlx5_wqe_ctrl_seg **last)
{
	if (head - tail >= MAX_POST)
		return -1;
	uint32_t idx = cur_post & (SQ_WQEBB - 1);
	uint8_t *w = wqe_at(cur_post);
	struct mlx5_wqe_ctrl_seg *ctrl = (void *)w;
	struct mlx5_wqe_raddr_seg *rs = (void *)(w + 16);
	rs->raddr = htobe64(raddr);
	rs->rkey = htobe32(rkey);
	rs->reserved = 0;
	mlx5dv_set_data_seg((void *)(w + 32), len, lkey, laddr);
	*(uint32_t *)(w + 8) = 0;
	mlx5dv_set_ctrl_seg(ctrl, cur_post & 0xffff, MLX5_OPCODE_RDMA_WRITE, 0, qpn, 0, 3, 0, 0);
	wrid[idx] = id;
	wqe_head[idx] = head;
	head++;
	cur_post += 1;
	*last = ctrl;
	return 0;
}

/* One inline send WQE of len bytes (len <= 44: one basic block). */
static inline int post_inline_send(uint64_t id, const uint8_t *data, uint32_t len,
				   struct mlx5_wqe_ctrl_seg **last)
{
	if (head - tail >= MAX_POST)
		return -1;
	uint32_t idx = cur_post & (SQ_WQEBB - 1);
	uint8_t *w = wqe_at(cur_post);
	struct mlx5_wqe_ctrl_seg *ctrl = (void *)w;
	struct mlx5_wqe_inl_data_seg *inl = (void *)(w + 16);
	inl->byte_count = htobe32(len | MLX5_INLINE_SEG);
	memcpy(w + 20, data, len);
	uint32_t ds = 1 + (4 + len + 15) / 16;
	*(uint32_t *)(w + 8) = 0;
	mlx5dv_set_ctrl_seg(ctrl, cur_post & 0xffff, MLX5_OPCODE_SEND, 0, qpn,
			    MLX5_WQE_CTRL_CQ_UPDATE, ds, 0, 0);
	wrid[idx] = id;
	wqe_head[idx] = head;
	head++;
	cur_post += 1;
	*last = ctrl;
	return 0;
}

/* post_send_db: one doorbell for the batch. */
static inline void ring(struct mlx5_wqe_ctrl_seg *last, int nreq, int inl)
{
	compiler_barrier(); /* udma_to_device_barrier on x86 */
	dbrec[1] = htobe32(cur_post & 0xffff);
	sfence(); /* mmio_wc_start */
	volatile uint64_t *reg = (volatile uint64_t *)(uar + 0x800 + bf_offset);
	if (nreq == 1 && inl) {
		for (int i = 0; i < 8; i++) {
			uint64_t v;
			memcpy(&v, (const uint8_t *)last + 8 * i, 8);
			reg[i] = v;
		}
	} else {
		uint64_t v;
		memcpy(&v, last, 8);
		*reg = v;
	}
	sfence(); /* mmio_flush_writes */
	bf_offset ^= 256;
}

/* The consumer side: everything posted completed. */
static void drain(void) { tail = head; }

static inline int poll_one(uint8_t *cq, uint32_t *ci, struct wc *wc)
{
	struct mlx5_cqe64 *c = (void *)(cq + (*ci & (NCQE - 1)) * 64);
	uint8_t opcode = mlx5dv_get_cqe_opcode(c);
	if (opcode == MLX5_CQE_INVALID || mlx5dv_get_cqe_owner(c) != !!(*ci & NCQE))
		return 0;
	lfence();
	uint16_t ctr = be16toh(c->wqe_counter);
	uint32_t idx = ctr & (SQ_WQEBB - 1);
	wc->wr_id = wrid[idx];
	tail = wqe_head[idx] + 1;
	wc->status = 0;
	wc->qp_num = be32toh(c->sop_drop_qpn) & 0xffffff;
	switch (be32toh(c->sop_drop_qpn) >> 24) {
	case MLX5_OPCODE_RDMA_READ:
		wc->opcode = 2;
		wc->byte_len = be32toh(c->byte_cnt);
		break;
	case MLX5_OPCODE_RDMA_WRITE:
		wc->opcode = 1;
		wc->byte_len = 0;
		break;
	default:
		wc->opcode = 0;
		wc->byte_len = 0;
	}
	(*ci)++;
	return 1;
}

static void fill_cqes(uint8_t *cq, uint32_t ci, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = ci + i;
		struct mlx5_cqe64 *c = (void *)(cq + (k & (NCQE - 1)) * 64);
		memset(c, 0, 64);
		c->wqe_counter = htobe16(k & 0xffff);
		c->sop_drop_qpn = htobe32((uint32_t)MLX5_OPCODE_RDMA_WRITE << 24 | qpn);
		c->op_own = (MLX5_CQE_REQ << 4) | !!(k & NCQE);
	}
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 2000000;
	sq = aligned_alloc(4096, SQ_WQEBB * 64);
	uar = aligned_alloc(4096, 4096);
	uint8_t *cq = aligned_alloc(4096, NCQE * 64);
	uint8_t *buf = aligned_alloc(4096, 65536);
	memset(sq, 0, SQ_WQEBB * 64);
	memset(cq, 0, NCQE * 64);
	memset(buf, 1, 65536);
	struct mlx5_wqe_ctrl_seg *last = NULL;
	static const int batches[] = {1, 8, 64};

	for (unsigned b = 0; b < sizeof batches / sizeof batches[0]; b++) {
		int batch = batches[b];
		double t = 0;
		long done = 0;
		while (done < iters) {
			double t0 = now_ns();
			for (int k = 0; k + batch <= (int)MAX_POST; k += batch) {
				for (int j = 0; j < batch; j++)
					post_write(done + j, (uint64_t)(uintptr_t)buf, 0x100, 64,
						   0x7f0000000000ull, 0x200, &last);
				ring(last, batch, 0);
				done += batch;
			}
			t += now_ns() - t0;
			drain();
		}
		printf("write_batch%d %.2f\n", batch, t / done);
	}
	{
		uint8_t data[16] = {0};
		double t = 0;
		long done = 0;
		while (done < iters) {
			double t0 = now_ns();
			for (uint32_t k = 0; k < MAX_POST; k++) {
				post_inline_send(done, data, sizeof data, &last);
				ring(last, 1, 1);
				done++;
			}
			t += now_ns() - t0;
			drain();
		}
		printf("inline_send %.2f\n", t / done);
	}
	{
		struct wc wcs[16];
		uint32_t ci = 0;
		double t = 0;
		long done = 0;
		while (done < iters) {
			fill_cqes(cq, ci, NCQE);
			double t0 = now_ns();
			uint32_t got = 0;
			while (got < NCQE) {
				int n = 0;
				while (n < 16 && poll_one(cq, &ci, &wcs[n]))
					n++;
				dbrec[0] = htobe32(ci & 0xffffff);
				got += n;
			}
			t += now_ns() - t0;
			done += NCQE;
		}
		printf("poll_cqe %.2f\n", t / done);
	}
	return 0;
}
