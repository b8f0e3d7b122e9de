/*
 * RC loopback probe for scripts/on-model.sh: Debian's libibverbs and libmlx5
 * open the model's device, create a PD, an MR, a CQ (with a completion
 * channel) and an RC QP connected to itself over RoCE v2 (GID 1), post a
 * signalled RDMA WRITE, wait for the completion event on the channel, poll
 * the CQ and compare the bytes. Exits 0 when the write landed. The
 * channel's fd is checked as the kernel's: O_NONBLOCK reads EAGAIN while
 * nothing is queued, poll() and epoll report it readable exactly while an
 * event is queued (waits have no timeout: only the event ends them).
 *
 *   eval "$(scripts/on-model.sh --print-env)"
 *   cc $CFLAGS preload/tests/rc_probe.c $LDFLAGS -libverbs -o rc_probe
 *   scripts/on-model.sh -- ./rc_probe
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define LEN 64
#define FAIL(...) do { fprintf(stderr, "rc_probe: " __VA_ARGS__); fprintf(stderr, "\n"); return 1; } while (0)

int main(void)
{
	int n;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (!l || !n)
		FAIL("no devices");
	struct ibv_context *c = ibv_open_device(l[0]);
	if (!c)
		FAIL("ibv_open_device: %m");
	struct ibv_pd *pd = ibv_alloc_pd(c);
	if (!pd)
		FAIL("ibv_alloc_pd: %m");
	char *buf = aligned_alloc(4096, 8192);
	for (int i = 0; i < 4096; i++)
		buf[i] = (char)(i * 7 + 1);
	memset(buf + 4096, 0, 4096);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		FAIL("ibv_reg_mr: %m");
	struct ibv_comp_channel *ch = ibv_create_comp_channel(c);
	if (!ch)
		FAIL("ibv_create_comp_channel: %m");
	struct ibv_cq *cq = ibv_create_cq(c, 16, NULL, ch, 0);
	if (!cq)
		FAIL("ibv_create_cq: %m");
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	if (!qp)
		FAIL("ibv_create_qp: %m");
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		FAIL("modify to INIT: %m");
	union ibv_gid gid;
	if (ibv_query_gid(c, 1, 1, &gid))
		FAIL("ibv_query_gid: %m");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		FAIL("modify to RTR: %m");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("modify to RTS: %m");
	if (ibv_req_notify_cq(cq, 0))
		FAIL("ibv_req_notify_cq: %m");
	/* Nothing queued yet: not readable, and a non-blocking read fails. */
	int fl = fcntl(ch->fd, F_GETFL);
	if (fl < 0 || fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK))
		FAIL("O_NONBLOCK on the channel: %m");
	if (!(fcntl(ch->fd, F_GETFL) & O_NONBLOCK))
		FAIL("F_GETFL does not show O_NONBLOCK");
	struct pollfd idle = { .fd = ch->fd, .events = POLLIN };
	if (poll(&idle, 1, 0) != 0)
		FAIL("the channel polls readable with no event queued (%#x)", idle.revents);
	{
		struct ibv_cq *c0;
		void *x0;
		if (ibv_get_cq_event(ch, &c0, &x0) == 0 || errno != EAGAIN)
			FAIL("a non-blocking read with nothing queued: %m (expected EAGAIN)");
	}

	struct ibv_sge s = { (uintptr_t)buf, LEN, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &s, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { (uintptr_t)buf + 4096, mr->rkey } }, *bad;
	if (ibv_post_send(qp, &wr, &bad))
		FAIL("ibv_post_send: %m");
	printf("qpn %#x: RDMA WRITE of %d bytes posted\n", qp->qp_num, LEN);

	/* Waits, with no timeout, until the model's HCA raises the event. */
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	if (poll(&pfd, 1, -1) != 1 || !(pfd.revents & POLLIN))
		FAIL("poll of the channel: %d %m", pfd.revents);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ee = { .events = EPOLLIN };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ch->fd, &ee))
		FAIL("epoll of the channel: %m");
	if (epoll_wait(ep, &ee, 1, 0) != 1)
		FAIL("epoll does not see the queued event");
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx))
		FAIL("ibv_get_cq_event: %m");
	pfd.revents = 0;
	if (poll(&pfd, 1, 0) != 0)
		FAIL("the channel still polls readable after its only event was read");
	if (epoll_wait(ep, &ee, 1, 0) != 0)
		FAIL("epoll still reports the channel after its only event was read");
	close(ep);
	if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0 || errno != EAGAIN)
		FAIL("a second non-blocking read: %m (expected EAGAIN)");
	if (ev_cq != cq)
		FAIL("event for another CQ");
	ibv_ack_cq_events(cq, 1);
	printf("completion event received; the channel fd polled and epolled readable exactly while it was queued\n");

	struct ibv_wc wc;
	int got = ibv_poll_cq(cq, 1, &wc);
	if (got != 1)
		FAIL("ibv_poll_cq = %d after the event", got);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 7 || wc.opcode != IBV_WC_RDMA_WRITE)
		FAIL("completion: status %s wr_id %llu opcode %d", ibv_wc_status_str(wc.status),
		     (unsigned long long)wc.wr_id, wc.opcode);
	printf("wc: wr_id %llu status %s opcode RDMA_WRITE qp_num %#x\n",
	       (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.qp_num);
	if (memcmp(buf, buf + 4096, LEN))
		FAIL("the written bytes differ");
	for (int i = LEN; i < 4096; i++)
		if (buf[4096 + i])
			FAIL("byte %d beyond the write changed", i);
	printf("%d bytes match\n", LEN);

	if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_destroy_comp_channel(ch) ||
	    ibv_dereg_mr(mr) || ibv_dealloc_pd(pd) || ibv_close_device(c))
		FAIL("teardown: %m");
	ibv_free_device_list(l);
	free(buf);
	printf("rc_probe: ok\n");
	return 0;
}
