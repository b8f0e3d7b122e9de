/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * capi/tests/c/cm_notify.c — the situation of rdma_notify(3) (seed 003),
 * from C over <rdma/rdma_cma.h>: on the passive side a receive completes
 * before the connection's RTU has arrived, so the CM has not reported
 * ESTABLISHED; the server calls rdma_notify(id, IBV_EVENT_COMM_EST) and then
 * sees RDMA_CM_EVENT_ESTABLISHED.
 *
 *   cm_notify -s -a ADDR [-p PORT]     server (passive side)
 *   cm_notify -c -a ADDR [-p PORT]     client (active side)
 *
 * The client makes the situation certain: it creates its QP itself
 * (ibv_create_qp, so id->qp stays NULL and librdmacm hands it
 * RDMA_CM_EVENT_CONNECT_RESPONSE instead of completing the connection), moves
 * it to RTR and RTS with rdma_init_qp_attr, sends "early", waits for the
 * server's reply, and only then calls rdma_establish (which sends the RTU).
 * The server (rdma_create_qp + rdma_accept: its QP is RTS) sees the receive,
 * finds no CM event waiting (the channel fd non-blocking: EAGAIN), calls
 * rdma_notify with an event the CM does not take (EINVAL), then with
 * IBV_EVENT_COMM_EST (0), reads ESTABLISHED, calls rdma_notify once more
 * (EISCONN: already established), and replies.
 *
 * Every line printed is deterministic (no QPNs, addresses or times), so a
 * run over rdma-core's librdmacm and one over another librdmacm can be
 * compared line by line. Exit status 0 when every step went as described.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define HELLO "cm_notify hello"
#define EARLY "early"
#define REPLY "reply after COMM_EST"
#define BUF 64

static const char *role = "?";

#define SAY(...)                                  \
	do {                                      \
		printf("%s: ", role);             \
		printf(__VA_ARGS__);              \
		printf("\n");                     \
		fflush(stdout);                   \
	} while (0)

static int failed(const char *what)
{
	SAY("FAILED: %s: %s", what, strerror(errno));
	return -1;
}

static const char *errno_name(int e)
{
	switch (e) {
	case 0: return "0";
	case EINVAL: return "EINVAL";
	case EISCONN: return "EISCONN";
	case EAGAIN: return "EAGAIN";
	case ENODEV: return "ENODEV";
	case ENOTCONN: return "ENOTCONN";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENOSYS: return "ENOSYS";
	default: return strerror(e);
	}
}

struct side {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp; /* the client's own QP (id->qp stays NULL) */
	struct ibv_mr *mr;
	char buf[2 * BUF];
};

/* The next CM event: its type and status printed; must be `want`. */
static int expect_event(struct side *s, enum rdma_cm_event_type want,
			struct rdma_cm_id **new_id)
{
	struct rdma_cm_event *ev;
	int ok;

	if (rdma_get_cm_event(s->ch, &ev))
		return failed("rdma_get_cm_event");
	SAY("event %s status %d", rdma_event_str(ev->event), ev->status);
	ok = ev->event == want && ev->status == 0;
	if (ok && (want == RDMA_CM_EVENT_CONNECT_REQUEST ||
		   want == RDMA_CM_EVENT_CONNECT_RESPONSE)) {
		const struct rdma_conn_param *p = &ev->param.conn;
		const char *pd = p->private_data;

		SAY("  responder_resources %u initiator_depth %u rnr_retry_count %u private_data_len %u",
		    p->responder_resources, p->initiator_depth, p->rnr_retry_count,
		    p->private_data_len);
		if (want == RDMA_CM_EVENT_CONNECT_REQUEST) {
			SAY("  private data starts \"%.*s\"",
			    (int)(pd && p->private_data_len >= sizeof(HELLO) ? sizeof(HELLO) - 1 : 0),
			    pd ? pd : "");
			SAY("  listen_id is the listener: %s, new id has verbs: %s",
			    ev->listen_id ? "yes" : "no", ev->id->verbs ? "yes" : "no");
		}
	}
	if (new_id)
		*new_id = ev->id;
	if (rdma_ack_cm_event(ev))
		return failed("rdma_ack_cm_event");
	if (!ok)
		SAY("FAILED: want %s", rdma_event_str(want));
	return ok ? 0 : -1;
}

/* Busy-polls the CQ for one completion (20 s at most). */
static int wait_wc(struct side *s, struct ibv_wc *wc)
{
	struct timespec pause = { 0, 1000000 };
	int i;

	for (i = 0; i < 20000; i++) {
		int n = ibv_poll_cq(s->cq, 1, wc);

		if (n < 0)
			return failed("ibv_poll_cq");
		if (n == 1) {
			if (wc->status != IBV_WC_SUCCESS) {
				SAY("FAILED: completion status %s", ibv_wc_status_str(wc->status));
				return -1;
			}
			return 0;
		}
		nanosleep(&pause, NULL);
	}
	SAY("FAILED: no completion in 20 s");
	return -1;
}

static int post_recv(struct side *s)
{
	struct ibv_sge sge = { (uintptr_t)s->buf, BUF, s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(s->qp ? s->qp : s->id->qp, &wr, &bad) ? failed("ibv_post_recv") : 0;
}

static int post_send(struct side *s, const char *msg)
{
	size_t len = strlen(msg);
	struct ibv_sge sge = { (uintptr_t)(s->buf + BUF), (uint32_t)len, s->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 2, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	struct ibv_wc wc;

	memcpy(s->buf + BUF, msg, len);
	if (ibv_post_send(s->qp ? s->qp : s->id->qp, &wr, &bad))
		return failed("ibv_post_send");
	if (wait_wc(s, &wc))
		return -1;
	if (wc.opcode != IBV_WC_SEND) {
		SAY("FAILED: send completion opcode %d", wc.opcode);
		return -1;
	}
	SAY("sent \"%s\"", msg);
	return 0;
}

static int wait_recv(struct side *s)
{
	struct ibv_wc wc;

	if (wait_wc(s, &wc))
		return -1;
	if (wc.opcode != IBV_WC_RECV) {
		SAY("FAILED: receive completion opcode %d", wc.opcode);
		return -1;
	}
	SAY("receive completed: %u bytes \"%.*s\"", wc.byte_len, (int)wc.byte_len, s->buf);
	return 0;
}

static int resources(struct side *s)
{
	s->pd = ibv_alloc_pd(s->id->verbs);
	if (!s->pd)
		return failed("ibv_alloc_pd");
	s->cq = ibv_create_cq(s->id->verbs, 8, NULL, NULL, 0);
	if (!s->cq)
		return failed("ibv_create_cq");
	s->mr = ibv_reg_mr(s->pd, s->buf, sizeof(s->buf), IBV_ACCESS_LOCAL_WRITE);
	if (!s->mr)
		return failed("ibv_reg_mr");
	return 0;
}

static void init_attr(struct side *s, struct ibv_qp_init_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->send_cq = s->cq;
	a->recv_cq = s->cq;
	a->qp_type = IBV_QPT_RC;
	a->cap.max_send_wr = 4;
	a->cap.max_recv_wr = 4;
	a->cap.max_send_sge = 1;
	a->cap.max_recv_sge = 1;
}

/* rdma_init_qp_attr for `state`, then ibv_modify_qp with its mask. */
static int to_state(struct side *s, enum ibv_qp_state state, const char *name)
{
	struct ibv_qp_attr attr;
	int mask;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = state;
	if (rdma_init_qp_attr(s->id, &attr, &mask))
		return failed("rdma_init_qp_attr");
	if (ibv_modify_qp(s->qp, &attr, mask))
		return failed("ibv_modify_qp");
	SAY("own QP to %s with rdma_init_qp_attr's attributes", name);
	return 0;
}

static void cleanup(struct side *s)
{
	if (s->id && s->id->qp)
		rdma_destroy_qp(s->id);
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->id)
		rdma_destroy_id(s->id);
}

static void param(struct rdma_conn_param *p)
{
	memset(p, 0, sizeof(*p));
	p->responder_resources = 1;
	p->initiator_depth = 1;
	p->retry_count = 7;
	p->rnr_retry_count = 7;
}

static int notify(struct side *s, enum ibv_event_type ev, const char *name)
{
	int r;

	errno = 0;
	r = rdma_notify(s->id, ev);
	SAY("rdma_notify(%s) = %d%s%s", name, r, r ? " errno " : "",
	    r ? errno_name(errno) : "");
	return r;
}

static int server(struct side *s, struct sockaddr_in *sin)
{
	struct rdma_cm_id *listen_id = NULL;
	struct rdma_cm_event *ev;
	struct ibv_qp_init_attr a;
	struct rdma_conn_param p;
	int flags, r = -1;

	if (rdma_create_id(s->ch, &listen_id, NULL, RDMA_PS_TCP))
		return failed("rdma_create_id");
	if (rdma_bind_addr(listen_id, (struct sockaddr *)sin) || rdma_listen(listen_id, 1)) {
		failed("rdma_bind_addr/rdma_listen");
		goto out;
	}
	SAY("listening");
	if (expect_event(s, RDMA_CM_EVENT_CONNECT_REQUEST, &s->id) || resources(s))
		goto out;
	init_attr(s, &a);
	if (rdma_create_qp(s->id, s->pd, &a)) {
		failed("rdma_create_qp");
		goto out;
	}
	if (post_recv(s))
		goto out;
	param(&p);
	if (rdma_accept(s->id, &p)) {
		failed("rdma_accept");
		goto out;
	}
	{
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qi;

		if (ibv_query_qp(s->id->qp, &qa, IBV_QP_STATE, &qi)) {
			failed("ibv_query_qp");
			goto out;
		}
		SAY("accepted; QP state after rdma_accept: %s",
		    qa.qp_state == IBV_QPS_RTS ? "RTS" : qa.qp_state == IBV_QPS_RTR ? "RTR" : "other");
	}
	/* The data arrives before the RTU. */
	if (wait_recv(s))
		goto out;
	flags = fcntl(s->ch->fd, F_GETFL);
	if (flags < 0 || fcntl(s->ch->fd, F_SETFL, flags | O_NONBLOCK)) {
		failed("fcntl");
		goto out;
	}
	errno = 0;
	if (rdma_get_cm_event(s->ch, &ev) == 0) {
		SAY("FAILED: an event before rdma_notify: %s", rdma_event_str(ev->event));
		rdma_ack_cm_event(ev);
		goto out;
	}
	SAY("no CM event yet: rdma_get_cm_event = -1 errno %s", errno_name(errno));
	if (errno != EAGAIN || fcntl(s->ch->fd, F_SETFL, flags))
		goto out;
	if (notify(s, IBV_EVENT_SQ_DRAINED, "IBV_EVENT_SQ_DRAINED") != -1 || errno != EINVAL)
		goto out;
	if (notify(s, IBV_EVENT_COMM_EST, "IBV_EVENT_COMM_EST"))
		goto out;
	if (expect_event(s, RDMA_CM_EVENT_ESTABLISHED, NULL))
		goto out;
	if (notify(s, IBV_EVENT_COMM_EST, "IBV_EVENT_COMM_EST") != -1 || errno != EISCONN)
		goto out;
	if (post_send(s, REPLY))
		goto out;
	if (expect_event(s, RDMA_CM_EVENT_DISCONNECTED, NULL))
		goto out;
	if (rdma_disconnect(s->id)) {
		failed("rdma_disconnect");
		goto out;
	}
	SAY("done");
	r = 0;
out:
	cleanup(s);
	if (listen_id)
		rdma_destroy_id(listen_id);
	return r;
}

static int client(struct side *s, struct sockaddr_in *sin)
{
	struct ibv_qp_init_attr a;
	struct rdma_conn_param p;
	int r = -1;

	if (rdma_create_id(s->ch, &s->id, NULL, RDMA_PS_TCP))
		return failed("rdma_create_id");
	if (rdma_resolve_addr(s->id, NULL, (struct sockaddr *)sin, 2000)) {
		failed("rdma_resolve_addr");
		goto out;
	}
	if (expect_event(s, RDMA_CM_EVENT_ADDR_RESOLVED, NULL))
		goto out;
	if (rdma_resolve_route(s->id, 2000)) {
		failed("rdma_resolve_route");
		goto out;
	}
	if (expect_event(s, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL) || resources(s))
		goto out;
	init_attr(s, &a);
	s->qp = ibv_create_qp(s->pd, &a);
	if (!s->qp) {
		failed("ibv_create_qp");
		goto out;
	}
	if (to_state(s, IBV_QPS_INIT, "INIT") || post_recv(s))
		goto out;
	param(&p);
	p.qp_num = s->qp->qp_num;
	p.private_data = HELLO;
	p.private_data_len = sizeof(HELLO);
	if (rdma_connect(s->id, &p)) {
		failed("rdma_connect");
		goto out;
	}
	SAY("connecting with our own QP (id->qp %s)", s->id->qp ? "set" : "NULL");
	if (expect_event(s, RDMA_CM_EVENT_CONNECT_RESPONSE, NULL))
		goto out;
	if (to_state(s, IBV_QPS_RTR, "RTR") || to_state(s, IBV_QPS_RTS, "RTS"))
		goto out;
	/* Data first: no RTU has been sent yet. */
	if (post_send(s, EARLY) || wait_recv(s))
		goto out;
	errno = 0;
	r = rdma_establish(s->id);
	SAY("rdma_establish = %d%s%s", r, r ? " errno " : "", r ? errno_name(errno) : "");
	if (r) {
		r = -1;
		goto out;
	}
	r = -1;
	if (rdma_disconnect(s->id)) {
		failed("rdma_disconnect");
		goto out;
	}
	if (expect_event(s, RDMA_CM_EVENT_DISCONNECTED, NULL))
		goto out;
	SAY("done");
	r = 0;
out:
	cleanup(s);
	return r;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(18300) };
	struct side s;
	int op, r, have_addr = 0;
	char mode = 0;

	memset(&s, 0, sizeof(s));
	while ((op = getopt(argc, argv, "sca:p:")) != -1) {
		switch (op) {
		case 's':
		case 'c':
			mode = (char)op;
			break;
		case 'a':
			have_addr = inet_pton(AF_INET, optarg, &sin.sin_addr) == 1;
			break;
		case 'p':
			sin.sin_port = htons((uint16_t)atoi(optarg));
			break;
		default:
			mode = 0;
			have_addr = 0;
			break;
		}
	}
	if (!mode || !have_addr) {
		fprintf(stderr, "usage: cm_notify -s|-c -a IPV4 [-p PORT]\n");
		return 2;
	}
	role = mode == 's' ? "server" : "client";
	s.ch = rdma_create_event_channel();
	if (!s.ch)
		return failed("rdma_create_event_channel") ? 1 : 0;
	r = mode == 's' ? server(&s, &sin) : client(&s, &sin);
	rdma_destroy_event_channel(s.ch);
	return r ? 1 : 0;
}
