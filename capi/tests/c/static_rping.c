/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * capi/tests/c/static_rping.c — an rping-like program written against
 * rdma-core 44's <rdma/rdma_cma.h> and <infiniband/verbs.h>, meant to be
 * linked fully static for musl over uverbs' libibverbs.a (capi/build-static.sh,
 * which also builds it dynamically against Debian's librdmacm/libibverbs).
 *
 *   static_rping -s -a ADDR [-p PORT] [-S SIZE] [-v]            server
 *   static_rping -c -a ADDR [-p PORT] [-S SIZE] [-C COUNT] [-v] [-V]   client
 *
 * It speaks rping's protocol on the wire (so it runs against Debian's
 * `rping` in either role): the client advertises its start buffer
 * (a 16-byte SEND: big-endian address, rkey, length), the server RDMA READs
 * it and answers with a SEND, the client advertises its sink buffer, the
 * server RDMA WRITEs what it read into it and answers again; the client
 * then compares the two buffers (-V). The pattern of ping N is rping's:
 * "rdma-ping-N: " followed by letters from 'A'+N (wrapping after 'z').
 * With -v the client prints `ping data: ...` and the server
 * `server ping data: ...` per ping, as rping -v does.
 *
 * Single-threaded: one poll(2) over the CM event channel's fd and the
 * completion channel's fd. Send and receive completions go to two CQs.
 * The client disconnects after COUNT pings; the server ends when the
 * client disconnects. Exit status 0 when every step succeeded.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define WAIT_MS 30000

/* rping's advertisement: what a SEND carries. */
struct adv {
	uint64_t buf;  /* big-endian */
	uint32_t rkey; /* big-endian */
	uint32_t size; /* big-endian */
};

struct conn {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *comp;
	struct ibv_cq *scq, *rcq;
	struct ibv_mr *recv_mr, *send_mr, *rdma_mr, *start_mr;
	struct adv recv_buf, send_buf;
	char *rdma_buf, *start_buf;
	int size;
	int disconnected;
};

static const char *prog = "static_rping";

static void fail(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(errno));
}

/* The next CM event, which must be `want`; acked before returning. */
static int expect_event(struct conn *c, enum rdma_cm_event_type want,
			struct rdma_cm_id **new_id)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(c->ch, &ev)) {
		fail("rdma_get_cm_event");
		return -1;
	}
	if (ev->event != want || ev->status) {
		fprintf(stderr, "%s: event %s status %d, want %s\n", prog,
			rdma_event_str(ev->event), ev->status,
			rdma_event_str(want));
		rdma_ack_cm_event(ev);
		return -1;
	}
	if (new_id)
		*new_id = ev->id;
	rdma_ack_cm_event(ev);
	return 0;
}

/* Waits for one completion on `cq`. Returns 1 with *wc filled, 0 when the
 * peer disconnected first (a DISCONNECTED event, or flushed work), -1 on
 * error or after WAIT_MS without progress. */
static int next_wc(struct conn *c, struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0) {
			fprintf(stderr, "%s: ibv_poll_cq: %d\n", prog, n);
			return -1;
		}
		if (n == 0) {
			if (ibv_req_notify_cq(cq, 0)) {
				fail("ibv_req_notify_cq");
				return -1;
			}
			n = ibv_poll_cq(cq, 1, wc);
			if (n < 0)
				return -1;
		}
		if (n == 1) {
			if (wc->status == IBV_WC_WR_FLUSH_ERR)
				return 0;
			if (wc->status != IBV_WC_SUCCESS) {
				fprintf(stderr, "%s: completion %s (opcode %d)\n", prog,
					ibv_wc_status_str(wc->status), wc->opcode);
				return -1;
			}
			return 1;
		}
		struct pollfd p[2] = {
			{ .fd = c->comp->fd, .events = POLLIN },
			{ .fd = c->ch->fd, .events = POLLIN },
		};
		n = poll(p, 2, WAIT_MS);
		if (n <= 0) {
			fprintf(stderr, "%s: %s waiting for a completion\n", prog,
				n ? strerror(errno) : "timed out");
			return -1;
		}
		if (p[0].revents & POLLIN) {
			struct ibv_cq *ev_cq;
			void *ev_ctx;

			if (ibv_get_cq_event(c->comp, &ev_cq, &ev_ctx)) {
				fail("ibv_get_cq_event");
				return -1;
			}
			ibv_ack_cq_events(ev_cq, 1);
		}
		if (p[1].revents & POLLIN) {
			struct rdma_cm_event *ev;
			enum rdma_cm_event_type type;

			if (rdma_get_cm_event(c->ch, &ev)) {
				fail("rdma_get_cm_event");
				return -1;
			}
			type = ev->event;
			rdma_ack_cm_event(ev);
			if (type == RDMA_CM_EVENT_DISCONNECTED) {
				c->disconnected = 1;
				return 0;
			}
			fprintf(stderr, "%s: unexpected event %s\n", prog,
				rdma_event_str(type));
			return -1;
		}
	}
}

/* The next completion on `cq` must be a successful `op`. */
static int expect_wc(struct conn *c, struct ibv_cq *cq, enum ibv_wc_opcode op)
{
	struct ibv_wc wc;
	int r = next_wc(c, cq, &wc);

	if (r <= 0)
		return r ? -1 : 0;
	if (wc.opcode != op) {
		fprintf(stderr, "%s: completion opcode %d, want %d\n", prog,
			wc.opcode, op);
		return -1;
	}
	if (op == IBV_WC_RECV && wc.byte_len != sizeof(struct adv)) {
		fprintf(stderr, "%s: received %u bytes, want %zu\n", prog,
			wc.byte_len, sizeof(struct adv));
		return -1;
	}
	return 1;
}

static int post_recv(struct conn *c)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)&c->recv_buf,
		.length = sizeof(c->recv_buf),
		.lkey = c->recv_mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	if (ibv_post_recv(c->id->qp, &wr, &bad)) {
		fail("ibv_post_recv");
		return -1;
	}
	return 0;
}

/* SEND the advertisement of `buf` (or, with buf NULL, whatever send_buf
 * holds: the server's go-ahead), then wait for its completion. */
static int send_adv(struct conn *c, char *buf, struct ibv_mr *mr)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)&c->send_buf,
		.length = sizeof(c->send_buf),
		.lkey = c->send_mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = 2,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;

	if (buf) {
		c->send_buf.buf = htobe64((uintptr_t)buf);
		c->send_buf.rkey = htobe32(mr->rkey);
		c->send_buf.size = htobe32((uint32_t)c->size);
	}
	if (ibv_post_send(c->id->qp, &wr, &bad)) {
		fail("ibv_post_send (SEND)");
		return -1;
	}
	return expect_wc(c, c->scq, IBV_WC_SEND);
}

/* An RDMA READ or WRITE between rdma_buf and the peer's advertised buffer. */
static int rdma_op(struct conn *c, enum ibv_wr_opcode op, uint32_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)c->rdma_buf,
		.length = len,
		.lkey = c->rdma_mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = 3,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;

	wr.wr.rdma.remote_addr = be64toh(c->recv_buf.buf);
	wr.wr.rdma.rkey = be32toh(c->recv_buf.rkey);
	if (ibv_post_send(c->id->qp, &wr, &bad)) {
		fail(op == IBV_WR_RDMA_READ ? "ibv_post_send (RDMA READ)" :
					      "ibv_post_send (RDMA WRITE)");
		return -1;
	}
	return expect_wc(c, c->scq,
			 op == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE);
}

/* PD, completion channel, two CQs, the QP (rdma_create_qp, so id->qp is
 * set) and the four buffers, on the id's device. */
static int setup(struct conn *c, int client)
{
	struct ibv_qp_init_attr attr;
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
		     IBV_ACCESS_REMOTE_WRITE;

	c->pd = ibv_alloc_pd(c->id->verbs);
	if (!c->pd) {
		fail("ibv_alloc_pd");
		return -1;
	}
	c->comp = ibv_create_comp_channel(c->id->verbs);
	if (!c->comp) {
		fail("ibv_create_comp_channel");
		return -1;
	}
	c->scq = ibv_create_cq(c->id->verbs, 16, NULL, c->comp, 0);
	c->rcq = ibv_create_cq(c->id->verbs, 4, NULL, c->comp, 0);
	if (!c->scq || !c->rcq) {
		fail("ibv_create_cq");
		return -1;
	}
	memset(&attr, 0, sizeof(attr));
	attr.send_cq = c->scq;
	attr.recv_cq = c->rcq;
	attr.qp_type = IBV_QPT_RC;
	attr.cap.max_send_wr = 8;
	attr.cap.max_recv_wr = 2;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 1;
	if (rdma_create_qp(c->id, c->pd, &attr)) {
		fail("rdma_create_qp");
		return -1;
	}
	if (!c->id->qp || c->id->qp->qp_type != IBV_QPT_RC) {
		fprintf(stderr, "%s: rdma_create_qp left id->qp unset\n", prog);
		return -1;
	}
	c->rdma_buf = calloc(1, c->size);
	c->start_buf = client ? calloc(1, c->size) : NULL;
	if (!c->rdma_buf || (client && !c->start_buf)) {
		fail("calloc");
		return -1;
	}
	c->recv_mr = ibv_reg_mr(c->pd, &c->recv_buf, sizeof(c->recv_buf),
				IBV_ACCESS_LOCAL_WRITE);
	c->send_mr = ibv_reg_mr(c->pd, &c->send_buf, sizeof(c->send_buf), 0);
	c->rdma_mr = ibv_reg_mr(c->pd, c->rdma_buf, c->size, access);
	if (client)
		c->start_mr = ibv_reg_mr(c->pd, c->start_buf, c->size, access);
	if (!c->recv_mr || !c->send_mr || !c->rdma_mr || (client && !c->start_mr)) {
		fail("ibv_reg_mr");
		return -1;
	}
	return post_recv(c);
}

static void teardown(struct conn *c)
{
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	if (c->start_mr)
		ibv_dereg_mr(c->start_mr);
	if (c->rdma_mr)
		ibv_dereg_mr(c->rdma_mr);
	if (c->send_mr)
		ibv_dereg_mr(c->send_mr);
	if (c->recv_mr)
		ibv_dereg_mr(c->recv_mr);
	if (c->scq)
		ibv_destroy_cq(c->scq);
	if (c->rcq)
		ibv_destroy_cq(c->rcq);
	if (c->comp)
		ibv_destroy_comp_channel(c->comp);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	free(c->rdma_buf);
	free(c->start_buf);
	if (c->id)
		rdma_destroy_id(c->id);
}

static void conn_param(struct rdma_conn_param *p)
{
	memset(p, 0, sizeof(*p));
	p->responder_resources = 1;
	p->initiator_depth = 1;
	p->retry_count = 7;
	p->rnr_retry_count = 7;
}

static int server(struct conn *c, struct sockaddr_in *sin, int verbose)
{
	struct rdma_cm_id *listen_id = NULL;
	struct rdma_conn_param param;
	int pings = 0, r = -1;

	if (rdma_create_id(c->ch, &listen_id, NULL, RDMA_PS_TCP)) {
		fail("rdma_create_id");
		return -1;
	}
	if (rdma_bind_addr(listen_id, (struct sockaddr *)sin)) {
		fail("rdma_bind_addr");
		goto out;
	}
	if (rdma_listen(listen_id, 1)) {
		fail("rdma_listen");
		goto out;
	}
	printf("%s: server listening on port %d\n", prog,
	       ntohs(rdma_get_src_port(listen_id)));
	fflush(stdout);
	if (expect_event(c, RDMA_CM_EVENT_CONNECT_REQUEST, &c->id))
		goto out;
	if (setup(c, 0))
		goto out;
	conn_param(&param);
	if (rdma_accept(c->id, &param)) {
		fail("rdma_accept");
		goto out;
	}
	if (expect_event(c, RDMA_CM_EVENT_ESTABLISHED, NULL))
		goto out;
	for (;;) {
		uint32_t len;
		int w = expect_wc(c, c->rcq, IBV_WC_RECV); /* start buffer */

		if (w <= 0) {
			r = w;
			break;
		}
		len = be32toh(c->recv_buf.size);
		if (len > (uint32_t)c->size) {
			fprintf(stderr, "%s: the peer's buffer (%u bytes) exceeds -S %d\n",
				prog, len, c->size);
			break;
		}
		if (post_recv(c) || rdma_op(c, IBV_WR_RDMA_READ, len) <= 0)
			break;
		c->rdma_buf[c->size - 1] = 0;
		if (verbose)
			printf("server ping data: %s\n", c->rdma_buf);
		if (send_adv(c, NULL, NULL) <= 0) /* go ahead */
			break;
		if (expect_wc(c, c->rcq, IBV_WC_RECV) <= 0) /* sink buffer */
			break;
		if (post_recv(c) ||
		    rdma_op(c, IBV_WR_RDMA_WRITE, (uint32_t)strlen(c->rdma_buf) + 1) <= 0)
			break;
		if (send_adv(c, NULL, NULL) <= 0) /* write complete */
			break;
		pings++;
	}
	if (r == 0) {
		if (!c->disconnected &&
		    expect_event(c, RDMA_CM_EVENT_DISCONNECTED, NULL))
			r = -1;
		else
			rdma_disconnect(c->id);
	}
	printf("%s: server done, %d pings, %s\n", prog, pings, r ? "error" : "disconnected");
out:
	teardown(c);
	if (listen_id)
		rdma_destroy_id(listen_id);
	return r;
}

static int client(struct conn *c, struct sockaddr_in *sin, int count,
		  int verbose, int validate)
{
	struct rdma_conn_param param;
	int ping, start = 'A', r = -1;

	if (rdma_create_id(c->ch, &c->id, NULL, RDMA_PS_TCP)) {
		fail("rdma_create_id");
		return -1;
	}
	if (rdma_resolve_addr(c->id, NULL, (struct sockaddr *)sin, 2000)) {
		fail("rdma_resolve_addr");
		goto out;
	}
	if (expect_event(c, RDMA_CM_EVENT_ADDR_RESOLVED, NULL))
		goto out;
	if (rdma_resolve_route(c->id, 2000)) {
		fail("rdma_resolve_route");
		goto out;
	}
	if (expect_event(c, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL))
		goto out;
	if (setup(c, 1))
		goto out;
	conn_param(&param);
	if (rdma_connect(c->id, &param)) {
		fail("rdma_connect");
		goto out;
	}
	if (expect_event(c, RDMA_CM_EVENT_ESTABLISHED, NULL))
		goto out;
	for (ping = 0; ping < count; ping++) {
		int i, n = snprintf(c->start_buf, c->size, "rdma-ping-%d: ", ping);
		int ch = start;

		for (i = n; i < c->size; i++) {
			c->start_buf[i] = (char)ch;
			if (++ch > 'z')
				ch = 'A';
		}
		c->start_buf[c->size - 1] = 0;
		if (++start > 'z')
			start = 'A';
		if (send_adv(c, c->start_buf, c->start_mr) <= 0 ||
		    expect_wc(c, c->rcq, IBV_WC_RECV) <= 0 || post_recv(c))
			goto out;
		memset(c->rdma_buf, 0, c->size);
		if (send_adv(c, c->rdma_buf, c->rdma_mr) <= 0 ||
		    expect_wc(c, c->rcq, IBV_WC_RECV) <= 0 || post_recv(c))
			goto out;
		if (validate && memcmp(c->start_buf, c->rdma_buf, c->size)) {
			fprintf(stderr, "%s: data mismatch in ping %d\n", prog, ping);
			goto out;
		}
		if (verbose)
			printf("ping data: %s\n", c->rdma_buf);
	}
	if (rdma_disconnect(c->id)) {
		fail("rdma_disconnect");
		goto out;
	}
	if (expect_event(c, RDMA_CM_EVENT_DISCONNECTED, NULL))
		goto out;
	printf("%s: client done, %d pings\n", prog, count);
	r = 0;
out:
	teardown(c);
	return r;
}

static int usage(void)
{
	fprintf(stderr, "usage: %s -s|-c -a ADDR [-p PORT] [-S SIZE] [-C COUNT] [-v] [-V]\n",
		prog);
	return 2;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(7174) };
	struct conn c = { .size = 64 };
	int op, role = 0, count = 10, verbose = 0, validate = 0, have_addr = 0, r;

	while ((op = getopt(argc, argv, "sca:p:S:C:vV")) != -1) {
		switch (op) {
		case 's':
		case 'c':
			role = op;
			break;
		case 'a':
			if (inet_pton(AF_INET, optarg, &sin.sin_addr) != 1) {
				fprintf(stderr, "%s: -a takes an IPv4 address\n", prog);
				return 2;
			}
			have_addr = 1;
			break;
		case 'p':
			sin.sin_port = htons((uint16_t)atoi(optarg));
			break;
		case 'S':
			c.size = atoi(optarg);
			break;
		case 'C':
			count = atoi(optarg);
			break;
		case 'v':
			verbose = 1;
			break;
		case 'V':
			validate = 1;
			break;
		default:
			return usage();
		}
	}
	if (!role || !have_addr || c.size < 32 || c.size > 65536 || count < 1)
		return usage();
	c.ch = rdma_create_event_channel();
	if (!c.ch) {
		fail("rdma_create_event_channel");
		return 1;
	}
	if (role == 's')
		r = server(&c, &sin, verbose);
	else
		r = client(&c, &sin, count, verbose, validate);
	rdma_destroy_event_channel(c.ch);
	fflush(stdout);
	return r ? 1 : 0;
}
