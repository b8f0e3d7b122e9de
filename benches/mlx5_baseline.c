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

/*
 * The segments every poster here writes, shared by C min's and C call's
 * (inlined: C min's constants still fold into them).
 */

/* The remote-address and data segments of an RDMA write WQE at w. */
static inline void write_segs(uint8_t *w, uint64_t laddr, uint32_t lkey, uint32_t len,
			      uint64_t raddr, uint32_t rkey)
{
	struct mlx5_wqe_raddr_seg *rs = (void *)(w + 16);
	rs->raddr = htobe64(raddr);
	rs->rkey = htobe32(rkey);
	rs->reserved = 0;
	mlx5dv_set_data_seg((void *)(w + 32), len, lkey, laddr);
}

/* The inline segment of len bytes (len <= 44) at w; returns the WQE's DS. */
static inline uint32_t inline_seg(uint8_t *w, const uint8_t *data, uint32_t len)
{
	struct mlx5_wqe_inl_data_seg *inl = (void *)(w + 16);
	inl->byte_count = htobe32(len | MLX5_INLINE_SEG);
	memcpy(w + 20, data, len);
	return 1 + (4 + len + 15) / 16;
}

/* The ctrl segment at w, signature and reserved bytes zero. */
static inline struct mlx5_wqe_ctrl_seg *ctrl_seg(uint8_t *w, uint32_t cur, uint8_t opcode,
						 uint32_t qp_num, uint8_t fm_ce_se, uint8_t ds)
{
	*(uint32_t *)(w + 8) = 0;
	mlx5dv_set_ctrl_seg((void *)w, cur & 0xffff, opcode, 0, qp_num, fm_ce_se, ds, 0, 0);
	return (void *)w;
}

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
	write_segs(w, laddr, lkey, len, raddr, rkey);
	struct mlx5_wqe_ctrl_seg *ctrl = ctrl_seg(w, cur_post, MLX5_OPCODE_RDMA_WRITE, qpn, 0, 3);
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
	uint32_t ds = inline_seg(w, data, len);
	struct mlx5_wqe_ctrl_seg *ctrl =
		ctrl_seg(w, cur_post, MLX5_OPCODE_SEND, qpn, MLX5_WQE_CTRL_CQ_UPDATE, ds);
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

/* The CQE at consumer index ci if the device handed it over, then lfence. */
static inline struct mlx5_cqe64 *next_cqe(uint8_t *cq, uint32_t ci)
{
	struct mlx5_cqe64 *c = (void *)(cq + (ci & (NCQE - 1)) * 64);
	uint8_t opcode = mlx5dv_get_cqe_opcode(c);
	if (opcode == MLX5_CQE_INVALID || mlx5dv_get_cqe_owner(c) != !!(ci & NCQE))
		return NULL;
	lfence();
	return c;
}

/* The fields a requester CQE gives its ibv_wc besides wr_id. */
static inline void req_fields(const struct mlx5_cqe64 *c, struct wc *wc)
{
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
}

static inline int poll_one(uint8_t *cq, uint32_t *ci, struct wc *wc)
{
	struct mlx5_cqe64 *c = next_cqe(cq, *ci);
	if (!c)
		return 0;
	uint16_t ctr = be16toh(c->wqe_counter);
	uint32_t idx = ctr & (SQ_WQEBB - 1);
	wc->wr_id = wrid[idx];
	tail = wqe_head[idx] + 1;
	req_fields(c, wc);
	(*ci)++;
	return 1;
}

/* The receive queue: its work-request ids, completed in order. */
#define RQ_WQE 512u
static uint64_t rq_wrid[RQ_WQE];
static uint32_t rq_tail;

/* The fields rdma-core's handle_responder gives an ibv_wc for a RESP_SEND. */
static inline void recv_fields(const struct mlx5_cqe64 *c, struct wc *wc)
{
	wc->status = 0;
	wc->opcode = 128; /* IBV_WC_RECV */
	wc->byte_len = be32toh(c->byte_cnt);
	wc->imm = 0;
	wc->qp_num = be32toh(c->sop_drop_qpn) & 0xffffff;
	uint32_t fr = be32toh(c->flags_rqpn);
	wc->src_qp = fr & 0xffffff;
	wc->sl = (fr >> 24) & 0xf;
	wc->flags = (fr >> 28) & 3 ? 1 : 0; /* IBV_WC_GRH */
	wc->pkey = be32toh(c->imm_inval_pkey) & 0xffff;
	wc->slid = be16toh(c->slid);
	wc->path = c->ml_path & 0x7f;
}

/* One receive CQE (RESP_SEND) of the QP's own receive queue. */
static inline int poll_recv_one(uint8_t *cq, uint32_t *ci, struct wc *wc)
{
	struct mlx5_cqe64 *c = next_cqe(cq, *ci);
	if (!c)
		return 0;
	wc->wr_id = rq_wrid[rq_tail++ & (RQ_WQE - 1)];
	recv_fields(c, wc);
	(*ci)++;
	return 1;
}

/*
 * The SRQ: its work-request ids by WQE, and its WQEs of a next segment and
 * one data segment, linked into a free list through next_wqe_index.
 */
#define SRQ_WQE 512u
static uint64_t srq_wrid[SRQ_WQE];
static uint8_t srq_buf[SRQ_WQE * 32];
static uint32_t srq_tail = SRQ_WQE - 1;

/* mlx5_free_srq_wqe without the lock: WQE ind goes after the tail. */
static inline void free_srq_wqe(uint32_t ind)
{
	struct mlx5_wqe_srq_next_seg *next = (void *)(srq_buf + srq_tail * 32);
	next->next_wqe_index = htobe16(ind);
	srq_tail = ind;
}

/* One receive CQE (RESP_SEND) of an SRQ: as poll_recv_one, the WQE named. */
static inline int poll_srq_one(uint8_t *cq, uint32_t *ci, struct wc *wc)
{
	struct mlx5_cqe64 *c = next_cqe(cq, *ci);
	if (!c)
		return 0;
	uint16_t ctr = be16toh(c->wqe_counter);
	wc->wr_id = srq_wrid[ctr & (SRQ_WQE - 1)];
	free_srq_wqe(ctr & (SRQ_WQE - 1));
	recv_fields(c, wc);
	(*ci)++;
	return 1;
}

/*
 * n receive CQEs (RESP_SEND of 64 bytes) from consumer index ci, naming
 * WQEs from *wqe on (an SRQ's; an RQ's CQEs name none that is read).
 */
static void fill_recv_cqes(uint8_t *cq, uint32_t ci, uint32_t n, uint32_t uidx, uint32_t *wqe)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = ci + i;
		struct mlx5_cqe64 *c = (void *)(cq + (k & (NCQE - 1)) * 64);
		memset(c, 0, 64);
		c->byte_cnt = htobe32(64);
		c->srqn_uidx = htobe32(uidx);
		c->sop_drop_qpn = htobe32(qpn);
		c->wqe_counter = htobe16((*wqe)++ & (SRQ_WQE - 1));
		c->op_own = (MLX5_CQE_RESP_SEND << 4) | !!(k & NCQE);
	}
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

/*
 * The rdma-core-shaped baseline ("rdma-core" rows): the same WQEs and CQEs,
 * reached the way providers/mlx5 reaches them from the generic verbs
 * (qp.c _mlx5_post_send, cq.c mlx5_poll_one/mlx5_parse_cqe): a list of
 * ibv_send_wr-like requests checked one by one (opcode range, queue room,
 * SGE count), a switch on the opcode for the remote segments, the SGE loop
 * skipping empty entries, fm_ce_se from the flags, and on the CQ side the
 * QP found by user index in a table and the opcode switched on. Like
 * rdma-core by default, each post and each poll takes the queue's spinlock
 * (uncontended here); uverbs needs none (&mut).
 */
#include <pthread.h>

enum { WR_RDMA_WRITE, WR_RDMA_WRITE_WITH_IMM, WR_SEND, WR_SEND_WITH_IMM, WR_RDMA_READ,
       WR_ATOMIC_CMP_AND_SWP, WR_ATOMIC_FETCH_AND_ADD, WR_MAX };
enum { SEND_FENCE = 1, SEND_SIGNALED = 2, SEND_SOLICITED = 4, SEND_INLINE = 8 };
static const uint8_t ib_opcode[WR_MAX] = {
	MLX5_OPCODE_RDMA_WRITE, MLX5_OPCODE_RDMA_WRITE_IMM, MLX5_OPCODE_SEND, MLX5_OPCODE_SEND_IMM,
	MLX5_OPCODE_RDMA_READ, MLX5_OPCODE_ATOMIC_CS, MLX5_OPCODE_ATOMIC_FA,
};

struct g_sge { uint64_t addr; uint32_t length, lkey; };
struct g_wr {
	uint64_t wr_id;
	struct g_wr *next;
	struct g_sge *sg_list;
	int num_sge;
	int opcode;
	unsigned send_flags;
	uint32_t imm_data;
	union {
		struct { uint64_t remote_addr; uint32_t rkey; } rdma;
		struct { uint64_t remote_addr, compare_add, swap; uint32_t rkey; } atomic;
	} wr;
};

static pthread_spinlock_t sq_lock, cq_lock;
/*
 * The QP's settings, read at run time as rdma-core reads them from its
 * struct mlx5_qp (set in main, so not constants gcc could fold: with
 * max_gs a constant 1, the SGE loop below would lose its loop).
 */
static struct { int max_gs, max_inline; uint32_t qpn; } g_cfg;

/*
 * Both generic calls are reached as libibverbs reaches a provider, through
 * a function pointer (ibv_post_send -> ops.post_send, ibv_poll_cq ->
 * ops.poll_cq): noipa keeps gcc from specializing them for this caller's
 * constants (it made a copy of poll_generic for ne = 16 before).
 */
__attribute__((noipa)) static int post_send_generic(struct g_wr *wr, struct g_wr **bad)
{
	struct mlx5_wqe_ctrl_seg *ctrl = NULL;
	int nreq, err = 0, inl = 0;
	uint32_t size = 0;
	pthread_spin_lock(&sq_lock);
	for (nreq = 0; wr; ++nreq, wr = wr->next) {
		if (wr->opcode < 0 || wr->opcode >= WR_MAX) { err = 22; *bad = wr; break; }
		if (head + nreq - tail >= MAX_POST) { err = 12; *bad = wr; break; }
		if (wr->num_sge > g_cfg.max_gs) { err = 12; *bad = wr; break; }
		uint32_t idx = cur_post & (SQ_WQEBB - 1);
		uint8_t *seg = wqe_at(cur_post);
		ctrl = (void *)seg;
		*(uint32_t *)(seg + 8) = 0;
		ctrl->imm = (wr->opcode == WR_SEND_WITH_IMM || wr->opcode == WR_RDMA_WRITE_WITH_IMM)
			    ? htobe32(wr->imm_data) : 0;
		ctrl->fm_ce_se = (wr->send_flags & SEND_FENCE ? MLX5_WQE_CTRL_FENCE : 0) |
				 (wr->send_flags & SEND_SIGNALED ? MLX5_WQE_CTRL_CQ_UPDATE : 0) |
				 (wr->send_flags & SEND_SOLICITED ? MLX5_WQE_CTRL_SOLICITED : 0);
		seg += sizeof *ctrl;
		size = sizeof *ctrl / 16;
		switch (wr->opcode) {
		case WR_ATOMIC_CMP_AND_SWP:
		case WR_ATOMIC_FETCH_AND_ADD: {
			struct mlx5_wqe_raddr_seg *r = (void *)seg;
			r->raddr = htobe64(wr->wr.atomic.remote_addr);
			r->rkey = htobe32(wr->wr.atomic.rkey);
			r->reserved = 0;
			struct mlx5_wqe_atomic_seg *a = (void *)(seg + 16);
			a->swap_add = htobe64(wr->opcode == WR_ATOMIC_CMP_AND_SWP ? wr->wr.atomic.swap
										  : wr->wr.atomic.compare_add);
			a->compare = htobe64(wr->wr.atomic.compare_add);
			seg += 32;
			size += 2;
			break;
		}
		case WR_RDMA_READ:
		case WR_RDMA_WRITE:
		case WR_RDMA_WRITE_WITH_IMM: {
			struct mlx5_wqe_raddr_seg *r = (void *)seg;
			r->raddr = htobe64(wr->wr.rdma.remote_addr);
			r->rkey = htobe32(wr->wr.rdma.rkey);
			r->reserved = 0;
			seg += 16;
			size += 1;
			break;
		}
		default:
			break;
		}
		if (wr->send_flags & SEND_INLINE && wr->num_sge) {
			struct mlx5_wqe_inl_data_seg *h = (void *)seg;
			uint32_t len = 0;
			uint8_t *p = seg + sizeof *h;
			for (int i = 0; i < wr->num_sge; i++) {
				uint32_t l = wr->sg_list[i].length;
				if (len + l > (uint32_t)g_cfg.max_inline) { err = 12; *bad = wr; goto out; }
				memcpy(p, (void *)(uintptr_t)wr->sg_list[i].addr, l);
				p += l;
				len += l;
			}
			inl = 1;
			if (len) {
				h->byte_count = htobe32(len | MLX5_INLINE_SEG);
				size += (len + sizeof *h + 15) / 16;
			}
		} else {
			struct mlx5_wqe_data_seg *d = (void *)seg;
			for (int i = 0; i < wr->num_sge; i++) {
				if (wr->sg_list[i].length) {
					if (wr->opcode == WR_ATOMIC_CMP_AND_SWP || wr->opcode == WR_ATOMIC_FETCH_AND_ADD)
						mlx5dv_set_data_seg(d, 8, wr->sg_list[i].lkey, wr->sg_list[i].addr);
					else
						mlx5dv_set_data_seg(d, wr->sg_list[i].length, wr->sg_list[i].lkey,
								    wr->sg_list[i].addr);
					++d;
					size++;
				}
			}
		}
		ctrl->opmod_idx_opcode = htobe32(((cur_post & 0xffff) << 8) | ib_opcode[wr->opcode]);
		ctrl->qpn_ds = htobe32(size | (g_cfg.qpn << 8));
		wrid[idx] = wr->wr_id;
		wqe_head[idx] = head + nreq;
		cur_post += (size * 16 + 63) / 64;
	}
out:
	if (nreq) {
		head += nreq;
		ring(ctrl, nreq, inl && nreq == 1 && size > 1);
	}
	pthread_spin_unlock(&sq_lock);
	return err;
}

/* A user-index table as rdma-core's (two levels, mlx5_find_uidx). */
struct g_srq { uint64_t *wrid; uint32_t wqe_cnt; pthread_spinlock_t lock; };
struct g_qp {
	uint64_t *wrid; uint32_t *wqe_head; uint32_t *tail; uint32_t wqe_cnt;
	uint64_t *rq_wrid; uint32_t *rq_tail; uint32_t rq_wqe_cnt;
	struct g_srq *srq; /* an SRQ's receives name their WQE */
};
static struct g_qp g_the_qp;
static struct g_qp **uidx_table[1 << 12];

__attribute__((noipa)) static int poll_generic(uint8_t *cq, uint32_t *ci, int ne, struct wc *wcs)
{
	int n;
	pthread_spin_lock(&cq_lock);
	for (n = 0; n < ne; n++) {
		struct mlx5_cqe64 *c = (void *)(cq + (*ci & (NCQE - 1)) * 64);
		uint8_t opcode = mlx5dv_get_cqe_opcode(c);
		if (opcode == MLX5_CQE_INVALID || mlx5dv_get_cqe_owner(c) != !!(*ci & NCQE))
			break;
		++*ci;
		lfence();
		struct wc *wc = &wcs[n];
		uint32_t uidx = be32toh(c->srqn_uidx) & 0xffffff;
		struct g_qp **lvl = uidx_table[uidx >> 12];
		struct g_qp *qp = lvl ? lvl[uidx & 0xfff] : NULL;
		if (!qp)
			break;
		wc->qp_num = be32toh(c->sop_drop_qpn) & 0xffffff;
		switch (opcode) {
		case MLX5_CQE_REQ: {
			uint16_t ctr = be16toh(c->wqe_counter);
			uint32_t idx = ctr & (qp->wqe_cnt - 1);
			switch (be32toh(c->sop_drop_qpn) >> 24) {
			case MLX5_OPCODE_RDMA_WRITE_IMM:
			case MLX5_OPCODE_RDMA_WRITE:
				wc->opcode = 1;
				wc->byte_len = 0;
				break;
			case MLX5_OPCODE_RDMA_READ:
				wc->opcode = 2;
				wc->byte_len = be32toh(c->byte_cnt);
				break;
			case MLX5_OPCODE_ATOMIC_CS:
			case MLX5_OPCODE_ATOMIC_FA:
				wc->opcode = 3;
				wc->byte_len = 8;
				break;
			default:
				wc->opcode = 0;
				wc->byte_len = 0;
			}
			wc->wr_id = qp->wrid[idx];
			*qp->tail = qp->wqe_head[idx] + 1;
			wc->status = 0;
			wc->flags = 0;
			break;
		}
		case MLX5_CQE_RESP_WR_IMM:
		case MLX5_CQE_RESP_SEND:
		case MLX5_CQE_RESP_SEND_IMM:
		case MLX5_CQE_RESP_SEND_INV: {
			/* get_resp_ctx_v1, then handle_responder */
			wc->flags = 0;
			wc->byte_len = be32toh(c->byte_cnt);
			if (qp->srq) {
				/* mlx5_free_srq_wqe takes the SRQ's lock per WQE */
				uint16_t ctr = be16toh(c->wqe_counter);
				wc->wr_id = qp->srq->wrid[ctr];
				pthread_spin_lock(&qp->srq->lock);
				free_srq_wqe(ctr & (qp->srq->wqe_cnt - 1));
				pthread_spin_unlock(&qp->srq->lock);
			} else {
				uint32_t idx = *qp->rq_tail & (qp->rq_wqe_cnt - 1);
				wc->wr_id = qp->rq_wrid[idx];
				++*qp->rq_tail;
			}
			switch (opcode) {
			case MLX5_CQE_RESP_WR_IMM:
				wc->opcode = 129; /* IBV_WC_RECV_RDMA_WITH_IMM */
				wc->flags |= 2;   /* IBV_WC_WITH_IMM */
				wc->imm = c->imm_inval_pkey;
				break;
			case MLX5_CQE_RESP_SEND:
				wc->opcode = 128; /* IBV_WC_RECV */
				break;
			case MLX5_CQE_RESP_SEND_IMM:
				wc->opcode = 128;
				wc->flags |= 2;
				wc->imm = c->imm_inval_pkey;
				break;
			case MLX5_CQE_RESP_SEND_INV:
				wc->opcode = 128;
				wc->flags |= 4; /* IBV_WC_WITH_INV */
				wc->imm = be32toh(c->imm_inval_pkey);
				break;
			}
			wc->slid = be16toh(c->slid);
			wc->sl = (be32toh(c->flags_rqpn) >> 24) & 0xf;
			wc->src_qp = be32toh(c->flags_rqpn) & 0xffffff;
			wc->path = c->ml_path & 0x7f;
			wc->flags |= (be32toh(c->flags_rqpn) >> 28) & 3 ? 1 : 0; /* IBV_WC_GRH */
			wc->pkey = be32toh(c->imm_inval_pkey) & 0xffff;
			wc->status = 0;
			break;
		}
		default: /* error CQEs: not in this benchmark */
			wc->status = 1;
			wc->flags = 0;
			break;
		}
	}
	dbrec[0] = htobe32(*ci & 0xffffff);
	pthread_spin_unlock(&cq_lock);
	return n;
}

static void run_generic(long iters, uint8_t *cq, uint8_t *buf)
{
	static struct g_wr wrs[64];
	struct g_sge sge = { (uint64_t)(uintptr_t)buf, 64, 0x100 };
	static const int batches[] = {1, 8, 64};
	pthread_spin_init(&sq_lock, 0);
	pthread_spin_init(&cq_lock, 0);
	for (unsigned b = 0; b < sizeof batches / sizeof batches[0]; b++) {
		int batch = batches[b];
		for (int j = 0; j < batch; j++) {
			wrs[j] = (struct g_wr){ .wr_id = j, .next = j + 1 < batch ? &wrs[j + 1] : NULL,
						.sg_list = &sge, .num_sge = 1, .opcode = WR_RDMA_WRITE,
						.send_flags = j + 1 == batch ? SEND_SIGNALED : 0 };
			wrs[j].wr.rdma.remote_addr = 0x7f0000000000ull;
			wrs[j].wr.rdma.rkey = 0x200;
		}
		double t = 0;
		long done = 0;
		while (done < iters) {
			double t0 = now_ns();
			for (int k = 0; k + batch <= (int)MAX_POST; k += batch) {
				struct g_wr *bad;
				if (post_send_generic(wrs, &bad))
					abort();
				done += batch;
			}
			t += now_ns() - t0;
			drain();
		}
		printf("rc_write_batch%d %.2f\n", batch, t / done);
	}
	{
		uint8_t data[16] = {0};
		struct g_sge isge = { (uint64_t)(uintptr_t)data, sizeof data, 0 };
		struct g_wr w = { .wr_id = 7, .sg_list = &isge, .num_sge = 1, .opcode = WR_SEND,
				  .send_flags = SEND_INLINE | SEND_SIGNALED };
		double t = 0;
		long done = 0;
		while (done < iters) {
			double t0 = now_ns();
			for (uint32_t k = 0; k < MAX_POST; k++) {
				struct g_wr *bad;
				if (post_send_generic(&w, &bad))
					abort();
				done++;
			}
			t += now_ns() - t0;
			drain();
		}
		printf("rc_inline_send %.2f\n", t / done);
	}
	{
		static struct g_qp *level0[1 << 12];
		static struct g_srq the_srq;
		static struct g_qp qp_on_srq;
		the_srq = (struct g_srq){ srq_wrid, SRQ_WQE };
		pthread_spin_init(&the_srq.lock, 0);
		g_the_qp = (struct g_qp){ wrid, wqe_head, &tail, SQ_WQEBB, rq_wrid, &rq_tail, RQ_WQE, NULL };
		qp_on_srq = (struct g_qp){ wrid, wqe_head, &tail, SQ_WQEBB, NULL, NULL, 0, &the_srq };
		level0[5] = &g_the_qp;
		level0[6] = &qp_on_srq;
		uidx_table[0] = level0;
		struct wc wcs[16];
		uint32_t ci = 0;
		double t = 0;
		long done = 0;
		while (done < iters) {
			fill_cqes(cq, ci, NCQE);
			for (uint32_t i = 0; i < NCQE; i++)
				((struct mlx5_cqe64 *)(cq + ((ci + i) & (NCQE - 1)) * 64))->srqn_uidx = htobe32(5);
			double t0 = now_ns();
			uint32_t got = 0;
			while (got < NCQE)
				got += poll_generic(cq, &ci, 16, wcs);
			t += now_ns() - t0;
			done += NCQE;
		}
		printf("rc_poll_cqe %.2f\n", t / done);
		t = 0;
		done = 0;
		uint32_t wqe = 0;
		while (done < iters) {
			fill_recv_cqes(cq, ci, RQ_WQE, 5, &wqe);
			double t0 = now_ns();
			uint32_t got = 0;
			while (got < RQ_WQE)
				got += poll_generic(cq, &ci, 16, wcs);
			t += now_ns() - t0;
			done += RQ_WQE;
		}
		printf("rc_poll_recv_cqe %.2f\n", t / done);
		t = 0;
		done = 0;
		wqe = 0;
		while (done < iters) {
			fill_recv_cqes(cq, ci, SRQ_WQE - 1, 6, &wqe);
			double t0 = now_ns();
			uint32_t got = 0;
			while (got < SRQ_WQE - 1)
				got += poll_generic(cq, &ci, 16, wcs);
			t += now_ns() - t0;
			done += SRQ_WQE - 1;
		}
		printf("rc_poll_srq_cqe %.2f\n", t / done);
	}
}

/*
 * ns per CQE polling iters CQEs (C min's loops): per round, FILL writes PER
 * CQEs (untimed), then POLL_ONE takes them, up to 16 per call, the consumer
 * index record written after each call. A macro (a GNU statement
 * expression), so that POLL_ONE is inlined as in a loop written out.
 */
#define TIME_POLLS(PER, FILL, POLL_ONE)                                          \
	({                                                                       \
		double t_ = 0;                                                   \
		long done_ = 0;                                                  \
		while (done_ < iters) {                                          \
			FILL;                                                    \
			double t0_ = now_ns();                                   \
			uint32_t got_ = 0;                                       \
			while (got_ < (PER)) {                                   \
				int n_ = 0;                                      \
				while (n_ < 16 && POLL_ONE(cq, &ci, &wcs[n_]))   \
					n_++;                                    \
				dbrec[0] = htobe32(ci & 0xffffff);               \
				got_ += n_;                                      \
			}                                                        \
			t_ += now_ns() - t0_;                                    \
			done_ += (PER);                                          \
		}                                                                \
		t_ / done_;                                                      \
	})

/*
 * C min as a library call ("C call" rows). C min's loops are inlined into
 * the timing loop with the queue's geometry, its QP number and its arrays'
 * addresses as compile-time constants (gcc folds the QP number into the
 * ctrl segment and the masks into immediates), which no library serving
 * QPs made at run time can have, and uverbs' measured calls are calls.
 * These rows do C min's work, with its helpers and nothing more, but with
 * the queue's state in a struct set at run time and reached through a
 * pointer, and each post or poll one call the caller's loop cannot
 * specialize (noipa), as a library's post and poll are.
 */
struct lq {
	uint8_t *buf;
	uint32_t bb_mask, max_post, qpn;
	uint32_t cur_post, head, tail, bf_offset;
	uint64_t *wrid;
	uint32_t *wqe_head;
	volatile uint32_t *dbrec;
	uint8_t *bf;
	uint64_t *rq_wrid;
	uint32_t rq_mask, rq_tail;
};
/* An SRQ: its work-request ids and WQEs (next segment, one data segment). */
struct lsrq {
	uint64_t *wrid;
	uint8_t *buf;
	uint32_t mask, tail;
};
struct lcq {
	uint8_t *buf;
	uint32_t mask, ci;
	volatile uint32_t *dbrec;
};

static inline void lq_ring(struct lq *q, struct mlx5_wqe_ctrl_seg *last, int bf)
{
	compiler_barrier();
	q->dbrec[1] = htobe32(q->cur_post & 0xffff);
	sfence();
	volatile uint64_t *reg = (volatile uint64_t *)(q->bf + q->bf_offset);
	if (bf) {
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
	sfence();
	q->bf_offset ^= 256;
}

/*
 * n RDMA writes of one SGE, the last signaled, one doorbell; -1 if they do
 * not fit. The geometry and the counters are read into locals first and the
 * counters stored back at the end, as a careful C library would: read
 * through q after each store to the queue (a char buffer, which may alias
 * anything), gcc reloads them for every WQE.
 */
__attribute__((noipa)) static int lq_post_writes(struct lq *q, uint64_t id, int n,
						 const struct g_sge *sge, uint64_t raddr, uint32_t rkey)
{
	uint8_t *buf = q->buf;
	uint64_t *wr_ids = q->wrid;
	uint32_t *heads = q->wqe_head;
	uint32_t mask = q->bb_mask, qp_num = q->qpn;
	uint32_t cur = q->cur_post, hd = q->head;
	if (hd - q->tail + n > q->max_post)
		return -1;
	struct mlx5_wqe_ctrl_seg *ctrl = NULL;
	for (int j = 0; j < n; j++) {
		uint32_t idx = cur & mask;
		uint8_t *w = buf + idx * 64;
		write_segs(w, sge->addr, sge->lkey, sge->length, raddr, rkey);
		ctrl = ctrl_seg(w, cur, MLX5_OPCODE_RDMA_WRITE, qp_num,
				j + 1 == n ? MLX5_WQE_CTRL_CQ_UPDATE : 0, 3);
		wr_ids[idx] = id + j;
		heads[idx] = hd;
		hd++;
		cur += 1;
	}
	q->cur_post = cur;
	q->head = hd;
	lq_ring(q, ctrl, 0);
	return 0;
}

/* One inline SEND of len bytes (len <= 44), rung by BlueFlame. */
__attribute__((noipa)) static int lq_post_inline_send(struct lq *q, uint64_t id, const uint8_t *data,
						      uint32_t len)
{
	uint32_t cur = q->cur_post, hd = q->head;
	if (hd - q->tail >= q->max_post)
		return -1;
	uint32_t idx = cur & q->bb_mask;
	uint8_t *w = q->buf + idx * 64;
	uint32_t qp_num = q->qpn;
	uint64_t *wr_ids = q->wrid;
	uint32_t *heads = q->wqe_head;
	uint32_t ds = inline_seg(w, data, len);
	struct mlx5_wqe_ctrl_seg *ctrl =
		ctrl_seg(w, cur, MLX5_OPCODE_SEND, qp_num, MLX5_WQE_CTRL_CQ_UPDATE, ds);
	wr_ids[idx] = id;
	heads[idx] = hd;
	q->head = hd + 1;
	q->cur_post = cur + 1;
	lq_ring(q, ctrl, 1);
	return 0;
}

/*
 * The same two posts written the other way: every field read through q
 * where it is used. gcc then reloads the counters after each store to the
 * queue, which costs a loop of requests, but holds nothing across the
 * inline SEND's memcpy call and saves callee-saved registers, which a
 * lone request gains from (8.8 against 10.3 ns for one RDMA write, 11.9
 * against 14.0 for the inline SEND, 4.1 against 3.4 per request in 64;
 * best of 10 rounds). C call is the faster of the two, per row. Its lone
 * RDMA write moved from 11.4 to 8.8 ns when the segment writers above were
 * shared with C min: the same instructions (80 and 82 under callgrind)
 * scheduled in another order. A lone post's time on this machine moves by
 * up to 3 ns with such orderings.
 */
__attribute__((noipa)) static int lq_post_writes_p(struct lq *q, uint64_t id, int n,
						   const struct g_sge *sge, uint64_t raddr, uint32_t rkey)
{
	struct mlx5_wqe_ctrl_seg *ctrl = NULL;
	for (int j = 0; j < n; j++) {
		if (q->head - q->tail >= q->max_post)
			return -1;
		uint32_t idx = q->cur_post & q->bb_mask;
		uint8_t *w = q->buf + idx * 64;
		write_segs(w, sge->addr, sge->lkey, sge->length, raddr, rkey);
		ctrl = ctrl_seg(w, q->cur_post, MLX5_OPCODE_RDMA_WRITE, q->qpn,
				j + 1 == n ? MLX5_WQE_CTRL_CQ_UPDATE : 0, 3);
		q->wrid[idx] = id + j;
		q->wqe_head[idx] = q->head;
		q->head++;
		q->cur_post += 1;
	}
	lq_ring(q, ctrl, 0);
	return 0;
}

__attribute__((noipa)) static int lq_post_inline_send_p(struct lq *q, uint64_t id,
							const uint8_t *data, uint32_t len)
{
	if (q->head - q->tail >= q->max_post)
		return -1;
	uint32_t idx = q->cur_post & q->bb_mask;
	uint8_t *w = q->buf + idx * 64;
	uint32_t ds = inline_seg(w, data, len);
	struct mlx5_wqe_ctrl_seg *ctrl =
		ctrl_seg(w, q->cur_post, MLX5_OPCODE_SEND, q->qpn, MLX5_WQE_CTRL_CQ_UPDATE, ds);
	q->wrid[idx] = id;
	q->wqe_head[idx] = q->head;
	q->head++;
	q->cur_post += 1;
	lq_ring(q, ctrl, 1);
	return 0;
}

/* The CQE at consumer index ci of a CQ of mask + 1 entries, then lfence. */
static inline struct mlx5_cqe64 *lcq_next(uint8_t *buf, uint32_t mask, uint32_t ci)
{
	struct mlx5_cqe64 *c = (void *)(buf + (ci & mask) * 64);
	uint8_t opcode = mlx5dv_get_cqe_opcode(c);
	if (opcode == MLX5_CQE_INVALID || mlx5dv_get_cqe_owner(c) != !!(ci & (mask + 1)))
		return NULL;
	lfence();
	return c;
}

/*
 * The loop of C call's polls: up to ne CQEs from the CQ's consumer index,
 * ONE(c, wc) taking each into its ibv_wc, then the consumer index stored
 * back and its record written. A macro (a GNU statement expression) so
 * that each poll keeps its queue's state in locals, as above.
 */
#define LCQ_POLL(CQ, NE, WCS, ONE)                                         \
	({                                                                 \
		uint8_t *buf_ = (CQ)->buf;                                 \
		uint32_t mask_ = (CQ)->mask, ci_ = (CQ)->ci;               \
		int n_ = 0;                                                \
		for (; n_ < (NE); n_++) {                                  \
			struct mlx5_cqe64 *c_ = lcq_next(buf_, mask_, ci_); \
			if (!c_)                                           \
				break;                                     \
			ONE(c_, &(WCS)[n_]);                               \
			ci_++;                                             \
		}                                                          \
		(CQ)->ci = ci_;                                            \
		*(CQ)->dbrec = htobe32(ci_ & 0xffffff);                    \
		n_;                                                        \
	})

/* Up to ne requester CQEs (poll_one's parse). */
__attribute__((noipa)) static int lcq_poll(struct lcq *cq, struct lq *q, int ne, struct wc *wcs)
{
	uint32_t bb_mask = q->bb_mask, tl = q->tail;
	uint64_t *wr_ids = q->wrid;
	uint32_t *heads = q->wqe_head;
#define REQ_ONE(C, WC)                                                     \
	do {                                                               \
		uint32_t idx = be16toh((C)->wqe_counter) & bb_mask;        \
		(WC)->wr_id = wr_ids[idx];                                 \
		tl = heads[idx] + 1;                                       \
		req_fields((C), (WC));                                     \
	} while (0)
	int n = LCQ_POLL(cq, ne, wcs, REQ_ONE);
#undef REQ_ONE
	q->tail = tl;
	return n;
}

/* Up to ne receive CQEs of the QP's own receive queue (poll_recv_one's). */
__attribute__((noipa)) static int lcq_poll_recv(struct lcq *cq, struct lq *q, int ne, struct wc *wcs)
{
	uint32_t rq_mask = q->rq_mask, rt = q->rq_tail;
	uint64_t *wr_ids = q->rq_wrid;
#define RECV_ONE(C, WC)                                                    \
	do {                                                               \
		(WC)->wr_id = wr_ids[rt++ & rq_mask];                      \
		recv_fields((C), (WC));                                    \
	} while (0)
	int n = LCQ_POLL(cq, ne, wcs, RECV_ONE);
#undef RECV_ONE
	q->rq_tail = rt;
	return n;
}

/* Up to ne receive CQEs of an SRQ (poll_srq_one's), each WQE freed. */
__attribute__((noipa)) static int lcq_poll_srq(struct lcq *cq, struct lsrq *srq, int ne, struct wc *wcs)
{
	uint8_t *wqes = srq->buf;
	uint32_t srq_mask = srq->mask, st = srq->tail;
	uint64_t *wr_ids = srq->wrid;
#define SRQ_ONE(C, WC)                                                     \
	do {                                                               \
		uint32_t ind = be16toh((C)->wqe_counter) & srq_mask;       \
		(WC)->wr_id = wr_ids[ind];                                 \
		struct mlx5_wqe_srq_next_seg *next = (void *)(wqes + st * 32); \
		next->next_wqe_index = htobe16(ind);                       \
		st = ind;                                                  \
		recv_fields((C), (WC));                                    \
	} while (0)
	int n = LCQ_POLL(cq, ne, wcs, SRQ_ONE);
#undef SRQ_ONE
	srq->tail = st;
	return n;
}

/*
 * ns per request posting iters requests, PER per call of CALL (an
 * expression that may use done, the requests posted so far, and is nonzero
 * on failure); q drained between chunks of a queue's worth.
 */
#define TIME_POSTS(PER, CALL)                                                   \
	({                                                                      \
		double t_ = 0;                                                  \
		long done = 0;                                                  \
		while (done < iters) {                                          \
			double t0_ = now_ns();                                  \
			for (int k_ = 0; k_ + (PER) <= (int)MAX_POST; k_ += (PER)) { \
				if (CALL)                                       \
					abort();                                \
				done += (PER);                                  \
			}                                                       \
			t_ += now_ns() - t0_;                                   \
			q.tail = q.head;                                        \
		}                                                               \
		t_ / done;                                                      \
	})

/*
 * ns per CQE polling iters CQEs: per round, FILL writes PER CQEs (untimed),
 * then CALL (a poll of up to 16 into wcs, returning how many) takes them.
 */
#define TIME_CALLED_POLLS(PER, FILL, CALL)                                      \
	({                                                                      \
		double t_ = 0;                                                  \
		long done_ = 0;                                                 \
		while (done_ < iters) {                                         \
			FILL;                                                   \
			double t0_ = now_ns();                                  \
			uint32_t got_ = 0;                                      \
			while (got_ < (PER))                                    \
				got_ += (CALL);                                 \
			t_ += now_ns() - t0_;                                   \
			done_ += (PER);                                         \
		}                                                               \
		t_ / done_;                                                     \
	})

static void run_called(long iters, uint8_t *cq_buf, uint8_t *buf)
{
	static const int batches[] = {1, 8, 64};
	struct lq q = { .buf = sq, .bb_mask = SQ_WQEBB - 1, .max_post = MAX_POST, .qpn = qpn,
			.wrid = wrid, .wqe_head = wqe_head, .dbrec = dbrec, .bf = uar + 0x800,
			.rq_wrid = rq_wrid, .rq_mask = RQ_WQE - 1 };
	struct lcq cq = { .buf = cq_buf, .mask = NCQE - 1, .dbrec = dbrec };
	struct lsrq srq = { .wrid = srq_wrid, .buf = srq_buf, .mask = SRQ_WQE - 1, .tail = SRQ_WQE - 1 };
	struct g_sge sge = { (uint64_t)(uintptr_t)buf, 64, 0x100 };
	uint8_t data[16] = {0};
	struct wc wcs[16];
	uint32_t wqe = 0;
	for (unsigned b = 0; b < sizeof batches / sizeof batches[0]; b++) {
		int n = batches[b];
		printf("call_write_batch%d %.2f\n", n,
		       TIME_POSTS(n, lq_post_writes(&q, done, n, &sge, 0x7f0000000000ull, 0x200)));
		printf("callp_write_batch%d %.2f\n", n,
		       TIME_POSTS(n, lq_post_writes_p(&q, done, n, &sge, 0x7f0000000000ull, 0x200)));
	}
	printf("call_inline_send %.2f\n",
	       TIME_POSTS(1, lq_post_inline_send(&q, done, data, sizeof data)));
	printf("callp_inline_send %.2f\n",
	       TIME_POSTS(1, lq_post_inline_send_p(&q, done, data, sizeof data)));
	printf("call_poll_cqe %.2f\n",
	       TIME_CALLED_POLLS(NCQE, fill_cqes(cq.buf, cq.ci, NCQE), lcq_poll(&cq, &q, 16, wcs)));
	printf("call_poll_recv_cqe %.2f\n",
	       TIME_CALLED_POLLS(RQ_WQE, fill_recv_cqes(cq.buf, cq.ci, RQ_WQE, 0, &wqe),
				 lcq_poll_recv(&cq, &q, 16, wcs)));
	wqe = 0;
	printf("call_poll_srq_cqe %.2f\n",
	       TIME_CALLED_POLLS(SRQ_WQE - 1, fill_recv_cqes(cq.buf, cq.ci, SRQ_WQE - 1, 0, &wqe),
				 lcq_poll_srq(&cq, &srq, 16, wcs)));
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
		uint32_t ci = 0, wqe = 0;
		printf("poll_cqe %.2f\n", TIME_POLLS(NCQE, fill_cqes(cq, ci, NCQE), poll_one));
		printf("poll_recv_cqe %.2f\n",
		       TIME_POLLS(RQ_WQE, fill_recv_cqes(cq, ci, RQ_WQE, 0, &wqe), poll_recv_one));
		wqe = 0;
		printf("poll_srq_cqe %.2f\n",
		       TIME_POLLS(SRQ_WQE - 1, fill_recv_cqes(cq, ci, SRQ_WQE - 1, 0, &wqe),
				  poll_srq_one));
	}
	g_cfg.max_gs = 1;
	g_cfg.max_inline = 44;
	g_cfg.qpn = qpn;
	run_generic(iters, cq, buf);
	run_called(iters, cq, buf);
	return 0;
}
