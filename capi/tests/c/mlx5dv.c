/* capi/tests/c/mlx5dv.c: rdma-core 44's mlx5dv.h API on the first device
 * (the mlx5 device model under scripts/on-model.sh), printing a transcript
 * of what each call answers. scripts/rdma-core-on-model.sh runs it over
 * Debian's libibverbs + libmlx5 and over ours (libibverbs.so.1 +
 * libmlx5.so.1) and requires the same transcript: libmlx5 is the oracle.
 * Only values that do not depend on the process (no addresses, no
 * handles) are printed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

#define CHECK(what, cond) do { if (!(cond)) { printf("FAIL %s\n", what); return 1; } } while (0)

/* Moves an RC QP to RTS connected to itself (RoCE v2 GID 1). */
static int connect_self(struct ibv_context *c, struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	union ibv_gid gid;
	if (ibv_query_gid(c, 1, 1, &gid))
		return -1;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR; a.path_mtu = IBV_MTU_1024; a.dest_qp_num = qp->qp_num;
	a.max_dest_rd_atomic = 1; a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1; a.ah_attr.grh.dgid = gid; a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 1; a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS; a.timeout = 14; a.retry_cnt = 7; a.rnr_retry = 7; a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

#include <errno.h>

/* mlx5dv_create_cq's attributes: what it accepts and refuses. */
static void dv_cqs(struct ibv_context *c)
{
	struct { const char *what; uint64_t mask; uint16_t size; uint32_t flags; uint8_t fmt; } t[] = {
		{ "128-byte CQEs", MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE, 128, 0, 0 },
		{ "64-byte CQEs", MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE, 64, 0, 0 },
		{ "100-byte CQEs", MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE, 100, 0, 0 },
		{ "padding of 128-byte CQEs", MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE | MLX5DV_CQ_INIT_ATTR_MASK_FLAGS,
		  128, MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD, 0 },
		{ "a reserved flag", MLX5DV_CQ_INIT_ATTR_MASK_FLAGS, 0, MLX5DV_CQ_INIT_ATTR_FLAGS_RESERVED, 0 },
		{ "hash compression", MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE, 0, 0, MLX5DV_CQE_RES_FORMAT_HASH },
		{ "an unknown comp_mask bit", 1 << 7, 0, 0, 0 },
	};
	for (unsigned i = 0; i < sizeof t / sizeof t[0]; i++) {
		struct ibv_cq_init_attr_ex ca = { .cqe = 10, .wc_flags = IBV_WC_STANDARD_FLAGS };
		struct mlx5dv_cq_init_attr da = { .comp_mask = t[i].mask, .cqe_size = t[i].size,
			.flags = t[i].flags, .cqe_comp_res_format = t[i].fmt };
		errno = 0;
		struct ibv_cq_ex *cq = mlx5dv_create_cq(c, &ca, &da);
		if (!cq) {
			printf("create_cq with %s: NULL, errno %d\n", t[i].what, errno);
			continue;
		}
		struct mlx5dv_cq dc = { 0 };
		struct mlx5dv_obj o = { .cq = { ibv_cq_ex_to_cq(cq), &dc } };
		int r = mlx5dv_init_obj(&o, MLX5DV_OBJ_CQ);
		printf("create_cq with %s: %u CQEs of %u bytes (init_obj %d), cqe %d\n", t[i].what,
		       dc.cqe_cnt, dc.cqe_size, r, ibv_cq_ex_to_cq(cq)->cqe);
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	}
}

/* mlx5dv_create_qp's attributes: what it accepts and refuses (the
 * operations of UMR and MMO, which uverbs does not have, are left out:
 * libmlx5 takes them on the model, uverbs refuses them with EOPNOTSUPP). */
static void dv_qp_attrs(struct ibv_context *c, struct ibv_pd *pd, struct ibv_cq *cq)
{
	enum { CF = MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS, OPS = MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS,
	       DC = MLX5DV_QP_INIT_ATTR_MASK_DC };
	struct { const char *what; enum ibv_qp_type type; uint64_t mask; uint32_t flags; uint64_t ops;
		 int dc_type; } t[] = {
		{ "no mlx5 attributes", IBV_QPT_RC, 0, 0, 0, 0 },
		{ "tunnel offloads", IBV_QPT_RC, CF, MLX5DV_QP_CREATE_TUNNEL_OFFLOADS, 0, 0 },
		{ "self loopback UC", IBV_QPT_RC, CF, MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_UC, 0, 0 },
		{ "self loopback MC", IBV_QPT_RC, CF, MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_MC, 0, 0 },
		{ "scatter to CQE disabled", IBV_QPT_RC, CF, MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE, 0, 0 },
		{ "scatter to CQE allowed", IBV_QPT_RC, CF, MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE, 0, 0 },
		{ "scatter to CQE both", IBV_QPT_RC, CF,
		  MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE | MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE, 0, 0 },
		{ "packet based credit mode", IBV_QPT_RC, CF, MLX5DV_QP_CREATE_PACKET_BASED_CREDIT_MODE, 0, 0 },
		{ "signature pipelining", IBV_QPT_RC, CF, MLX5DV_QP_CREATE_SIG_PIPELINING, 0, 0 },
		{ "an unknown create flag", IBV_QPT_RC, CF, 1 << 7, 0, 0 },
		{ "an unknown comp_mask bit", IBV_QPT_RC, 1 << 4, 0, 0, 0 },
		{ "raw WQEs on RC", IBV_QPT_RC, OPS, 0, MLX5DV_QP_EX_WITH_RAW_WQE, 0 },
		{ "raw WQEs on UC", IBV_QPT_UC, OPS, 0, MLX5DV_QP_EX_WITH_RAW_WQE, 0 },
		{ "raw WQEs on UD", IBV_QPT_UD, OPS, 0, MLX5DV_QP_EX_WITH_RAW_WQE, 0 },
		{ "MR lists on UC", IBV_QPT_UC, OPS, 0, MLX5DV_QP_EX_WITH_MR_LIST, 0 },
		{ "an unknown mlx5 operation", IBV_QPT_RC, OPS, 0, 1 << 5, 0 },
		{ "DC on an RC QP", IBV_QPT_RC, DC, 0, 0, MLX5DV_DCTYPE_DCI },
		{ "a driver QP without DC", IBV_QPT_DRIVER, 0, 0, 0, 0 },
		{ "a DCI", IBV_QPT_DRIVER, DC, 0, 0, MLX5DV_DCTYPE_DCI },
		{ "a DC of type 7", IBV_QPT_DRIVER, DC, 0, 0, 7 },
	};
	for (unsigned i = 0; i < sizeof t / sizeof t[0]; i++) {
		struct ibv_qp_init_attr_ex ia = { .send_cq = cq, .recv_cq = cq, .qp_type = t[i].type,
			.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
			.comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd };
		if (t[i].mask & OPS) {
			ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			ia.send_ops_flags = IBV_QP_EX_WITH_SEND;
		}
		struct mlx5dv_qp_init_attr da = { .comp_mask = t[i].mask, .create_flags = t[i].flags,
			.send_ops_flags = t[i].ops };
		da.dc_init_attr.dc_type = t[i].dc_type;
		errno = 0;
		struct ibv_qp *qp = mlx5dv_create_qp(c, &ia, &da);
		if (!qp) {
			printf("create_qp with %s: NULL, errno %d\n", t[i].what, errno);
			continue;
		}
		printf("create_qp with %s: type %d, send %u recv %u inline %u\n", t[i].what, qp->qp_type,
		       ia.cap.max_send_wr, ia.cap.max_recv_wr, ia.cap.max_inline_data);
		ibv_destroy_qp(qp);
	}
}

/* An RC QP made by mlx5dv_create_qp with raw WQEs, connected to itself: a
 * session posts an RDMA WRITE built by hand (mlx5dv_wr_raw_wqe) and one
 * built by ibv_wr_rdma_write; both execute, the raw one completing as
 * IBV_WC_DRIVER2 (MLX5DV_WC_RAW_WQE). */
static int raw_wqes(struct ibv_context *c, struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE };
	struct mlx5dv_qp_init_attr da = { .comp_mask = MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS,
		.send_ops_flags = MLX5DV_QP_EX_WITH_RAW_WQE };
	struct ibv_qp *qp = mlx5dv_create_qp(c, &ia, &da);
	CHECK("raw WQE QP", qp);
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);
	struct mlx5dv_qp_ex *dv = qpx ? mlx5dv_qp_ex_from_ibv_qp_ex(qpx) : NULL;
	CHECK("qp_ex", qpx && dv && dv->wr_raw_wqe);
	CHECK("connect", !connect_self(c, qp));
	uint8_t *buf = aligned_alloc(4096, 4096);
	memset(buf, 0, 4096);
	memcpy(buf, "raw wqe!", 8);
	memcpy(buf + 8, "builder!", 8);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK("mr", mr);
	/* ctrl + remote address + data: an RDMA WRITE of 8 bytes to buf + 1024. */
	uint8_t wqe[48] = { 0 };
	struct mlx5_wqe_ctrl_seg *ctrl = (void *)wqe;
	mlx5dv_set_ctrl_seg(ctrl, 0x1234, MLX5_OPCODE_RDMA_WRITE, 0, qp->qp_num,
			    MLX5_WQE_CTRL_CQ_UPDATE, 3, 0, 0);
	struct mlx5_wqe_raddr_seg *raddr = (void *)(wqe + 16);
	raddr->raddr = htobe64((uintptr_t)buf + 1024);
	raddr->rkey = htobe32(mr->rkey);
	mlx5dv_set_data_seg((void *)(wqe + 32), 8, mr->lkey, (uintptr_t)buf);
	for (int round = 0; round < 3; round++) {
		ibv_wr_start(qpx);
		qpx->wr_id = 10 * round + 1;
		mlx5dv_wr_raw_wqe(dv, wqe);
		qpx->wr_id = 10 * round + 2;
		qpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(qpx, mr->rkey, (uintptr_t)buf + 2048);
		ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)buf + 8, 8);
		int r = ibv_wr_complete(qpx);
		struct ibv_wc wc[2];
		int got = 0;
		for (int tries = 0; got < 2 && tries < 5000; tries++) {
			int n = ibv_poll_cq(cq, 2 - got, wc + got);
			if (n < 0)
				break;
			got += n;
			if (got < 2)
				usleep(1000);
		}
		printf("raw round %d: complete %d, %d completions", round, r, got);
		for (int i = 0; i < got; i++)
			printf(" (wr_id %llu status %d opcode %d)", (unsigned long long)wc[i].wr_id,
			       wc[i].status, wc[i].opcode);
		printf(", written %.8s %.8s\n", (char *)buf + 1024, (char *)buf + 2048);
		memset(buf + 1024, '-', 8);
		memset(buf + 2048, '-', 8);
	}
	/* Refused: a raw WQE counting no units. */
	uint8_t bad[48];
	memcpy(bad, wqe, sizeof bad);
	bad[7] = 0;
	ibv_wr_start(qpx);
	mlx5dv_wr_raw_wqe(dv, bad);
	ibv_wr_abort(qpx);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	free(buf);
	return 0;
}

/* mlx5dv_create_qp: its attributes, then raw WQEs. */
static int dv_qps(struct ibv_context *c)
{
	struct ibv_pd *pd = ibv_alloc_pd(c);
	struct ibv_cq *cq = ibv_create_cq(c, 64, NULL, NULL, 0);
	CHECK("dv_qps pd/cq", pd && cq);
	dv_qp_attrs(c, pd, cq);
	int r = raw_wqes(c, pd, cq);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	return r;
}

/* The views of mlx5dv_init_obj, and an RDMA WRITE posted and completed by
 * hand through them (a UCX-style data path: WQE into sq.buf, doorbell
 * record, 8-byte doorbell to bf.reg, CQE read from the CQ's buffer). */
static int views(struct ibv_context *c)
{
	struct ibv_pd *pd = ibv_alloc_pd(c);
	struct ibv_cq *cq = ibv_create_cq(c, 64, NULL, NULL, 0);
	CHECK("pd/cq", pd && cq);
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 32, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 2 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 32, .max_sge = 2 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	union ibv_gid gid;
	CHECK("qp/srq/gid", qp && srq && !ibv_query_gid(c, 1, 1, &gid));
	struct ibv_ah_attr aa = { .is_global = 1, .grh = { .dgid = gid, .sgid_index = 1, .hop_limit = 64,
		.flow_label = 0x12345 }, .port_num = 1 };
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	CHECK("ah", ah);

	struct mlx5dv_qp dq = { .comp_mask = MLX5DV_QP_MASK_UAR_MMAP_OFFSET | MLX5DV_QP_MASK_RAW_QP_HANDLES };
	struct mlx5dv_cq dc = { 0 };
	struct mlx5dv_srq ds = { .comp_mask = MLX5DV_SRQ_MASK_SRQN };
	struct mlx5dv_ah dah = { 0 };
	struct mlx5dv_pd dpd = { 0 };
	struct mlx5dv_obj o = { .qp = { qp, &dq }, .cq = { cq, &dc }, .srq = { srq, &ds },
		.ah = { ah, &dah }, .pd = { pd, &dpd } };
	int r = mlx5dv_init_obj(&o, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ | MLX5DV_OBJ_SRQ | MLX5DV_OBJ_AH | MLX5DV_OBJ_PD);
	printf("init_obj %d\n", r);
	printf("qp: sq %u x %u, rq %u x %u, bf.size %u, bf.reg %#lx in its page, comp_mask %#llx, raw %u %u %u %u\n",
	       dq.sq.wqe_cnt, dq.sq.stride, dq.rq.wqe_cnt, dq.rq.stride, dq.bf.size,
	       (unsigned long)((uintptr_t)dq.bf.reg & 0xfff), (unsigned long long)dq.comp_mask,
	       dq.tirn, dq.tisn, dq.rqn, dq.sqn);
	printf("qp: sq after rq %d, dbrec counters %u %u\n",
	       (uintptr_t)dq.sq.buf == (uintptr_t)dq.rq.buf + dq.rq.wqe_cnt * dq.rq.stride,
	       be32toh(dq.dbrec[0]), be32toh(dq.dbrec[1]));
	printf("cq: %u CQEs of %u bytes, cqn %#x, cq_uar %#lx in its page, comp_mask %#llx\n",
	       dc.cqe_cnt, dc.cqe_size, dc.cqn, (unsigned long)((uintptr_t)dc.cq_uar & 0xfff),
	       (unsigned long long)dc.comp_mask);
	printf("srq: stride %u head %u tail %u srqn %#x comp_mask %#llx\n", ds.stride, ds.head, ds.tail,
	       ds.srqn, (unsigned long long)ds.comp_mask);
	const uint8_t *av = (const uint8_t *)dah.av;
	printf("ah av (bytes 0..14, 16..48; 14..16 the UDP source port):");
	for (int i = 0; i < 48; i++)
		if (i < 14 || i >= 16)
			printf("%s%02x", i % 8 ? "" : " ", av[i]);
	printf("\npd: pdn %#x\n", dpd.pdn);
	struct mlx5dv_obj bad = { .pd = { pd, &dpd } };
	printf("init_obj of nothing %d\n", mlx5dv_init_obj(&bad, 0));
	/* The MLX5_1.0 ABI of mlx5dv_init_obj: a CQ's cq_uar is the address of
	 * a pointer to the UAR. */
	int (*init_obj_1_0)(struct mlx5dv_obj *, uint64_t) =
		(int (*)(struct mlx5dv_obj *, uint64_t))dlvsym(RTLD_DEFAULT, "mlx5dv_init_obj", "MLX5_1.0");
	struct mlx5dv_cq dc10 = { 0 };
	struct mlx5dv_obj o10 = { .cq = { cq, &dc10 } };
	r = init_obj_1_0 ? init_obj_1_0(&o10, MLX5DV_OBJ_CQ) : -1;
	printf("init_obj@MLX5_1.0 %d: cq_uar points at the UAR %d, cqn the same %d\n", r,
	       init_obj_1_0 && *(void **)dc10.cq_uar == dc.cq_uar, dc10.cqn == dc.cqn);

	/* An RDMA WRITE of 64 bytes from buf to buf + 4096, by hand. */
	char *buf = aligned_alloc(4096, 8192);
	memset(buf, 0, 8192);
	for (int i = 0; i < 64; i++)
		buf[i] = (char)(i + 1);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK("mr/connect", mr && !connect_self(c, qp));
	uint8_t *wqe = (uint8_t *)dq.sq.buf;
	memset(wqe, 0, 64);
	struct mlx5_wqe_ctrl_seg *ctrl = (void *)wqe;
	mlx5dv_set_ctrl_seg(ctrl, 0, MLX5_OPCODE_RDMA_WRITE, 0, qp->qp_num, MLX5_WQE_CTRL_CQ_UPDATE,
			    3, 0, 0);
	struct mlx5_wqe_raddr_seg *raddr = (void *)(wqe + 16);
	raddr->raddr = htobe64((uintptr_t)buf + 4096);
	raddr->rkey = htobe32(mr->rkey);
	mlx5dv_set_data_seg((void *)(wqe + 32), 64, mr->lkey, (uintptr_t)buf);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	dq.dbrec[MLX5_SND_DBR] = htobe32(1);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	*(volatile uint64_t *)dq.bf.reg = *(uint64_t *)ctrl;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	struct mlx5_cqe64 *cqe = (void *)((uint8_t *)dc.buf + dc.cqe_size - 64);
	int spins = 0;
	while (spins < 20000000 &&
	       (mlx5dv_get_cqe_opcode(cqe) == MLX5_CQE_INVALID || mlx5dv_get_cqe_owner(cqe) != 0))
		spins++;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	printf("hand-posted RDMA WRITE: cqe opcode %u, wqe_counter %u, qpn %#x match %d, data %s\n",
	       mlx5dv_get_cqe_opcode(cqe), be16toh(cqe->wqe_counter),
	       be32toh(cqe->sop_drop_qpn) & 0xffffff, (be32toh(cqe->sop_drop_qpn) & 0xffffff) == qp->qp_num,
	       memcmp(buf, buf + 4096, 64) ? "differs" : "copied");
	dc.dbrec[0] = htobe32(1); /* the consumer index */

	ibv_destroy_qp(qp);
	ibv_destroy_srq(srq);
	ibv_destroy_ah(ah);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	free(buf);
	return 0;
}
int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int n; struct ibv_device **l = ibv_get_device_list(&n);
  if (!l || !n) { printf("no devices\n"); return 1; }
  printf("is_supported %d\n", mlx5dv_is_supported(l[0]));
  struct mlx5dv_context_attr a = { .flags = MLX5DV_CONTEXT_FLAGS_DEVX };
  struct ibv_context *c = mlx5dv_open_device(l[0], &a);
  if (!c) { perror("open"); return 1; }
  struct mlx5dv_context d; memset(&d, 0xab, sizeof d); d.comp_mask = ~0ULL;
  int r = mlx5dv_query_device(c, &d);
  printf("query %d version %u flags %#llx comp_mask %#llx\n", r, d.version, (unsigned long long)d.flags, (unsigned long long)d.comp_mask);
  printf("cqe_comp %u %#x swp %#x %#x striding %u %u %u %u %#x tunnel %#x dynbf %u clk %llu flow %#x dcodp %#x hcaclk %d lag %u\n",
    d.cqe_comp_caps.max_num, d.cqe_comp_caps.supported_format, d.sw_parsing_caps.sw_parsing_offloads, d.sw_parsing_caps.supported_qpts,
    d.striding_rq_caps.min_single_stride_log_num_of_bytes, d.striding_rq_caps.max_single_stride_log_num_of_bytes,
    d.striding_rq_caps.min_single_wqe_log_num_of_strides, d.striding_rq_caps.max_single_wqe_log_num_of_strides, d.striding_rq_caps.supported_qpts,
    d.tunnel_offloads_caps, d.max_dynamic_bfregs, (unsigned long long)d.max_clock_info_update_nsec, d.flow_action_flags, d.dc_odp_caps,
    d.hca_core_clock != NULL, d.num_lag_ports);
  printf("sig %#llx %#x %#x %#x dci %u %u memcpy %zu crypto %u %u %u %u %#x\n", (unsigned long long)d.sig_caps.block_size, d.sig_caps.block_prot,
    d.sig_caps.t10dif_bg, d.sig_caps.crc_type, d.dci_streams_caps.max_log_num_concurent, d.dci_streams_caps.max_log_num_errored,
    d.max_wr_memcpy_length, d.crypto_caps.failed_selftests, d.crypto_caps.crypto_engines, d.crypto_caps.wrapped_import_method,
    d.crypto_caps.log_max_num_deks, d.crypto_caps.flags);
  struct mlx5dv_clock_info ci; r = mlx5dv_get_clock_info(c, &ci);
  printf("clock_info %d mult %u shift %u mask %#llx\n", r, ci.mult, ci.shift, (unsigned long long)ci.mask);
  struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
  r = ibv_query_rt_values_ex(c, &v);
  printf("rt_values %d comp_mask %#x nonzero %d\n", r, v.comp_mask, v.raw_clock.tv_nsec != 0 || v.raw_clock.tv_sec != 0);
  dv_cqs(c);
  if (dv_qps(c))
    return 1;
  return views(c);
}
