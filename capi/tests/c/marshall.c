/* The conversions librdmacm calls (ibv_copy_*_from_kern), checked from C
 * against Debian's verbs.h and sa.h and the kernel's ib_user_verbs.h and
 * ib_user_sa.h: each kernel struct is filled with a byte pattern, the
 * library converts it, and the result must equal what C's own field
 * assignments make of it (both destinations start from the same bytes, so
 * padding compares equal and a field written at a wrong offset does not).
 * Prints one PASS/FAIL line per conversion; exits 1 on any failure.
 * Built and run by capi/tests/marshall.rs. */
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_sa.h>

/* libibverbs' marshall.h is not in libibverbs-dev: the prototypes. */
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);

static void pattern(void *p, size_t n, unsigned seed)
{
	unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(seed + 31 * i + (i >> 3));
}

static void expect_ah(struct ibv_ah_attr *d, const struct ib_uverbs_ah_attr *s)
{
	memcpy(d->grh.dgid.raw, s->grh.dgid, 16);
	d->grh.flow_label = s->grh.flow_label;
	d->grh.sgid_index = s->grh.sgid_index;
	d->grh.hop_limit = s->grh.hop_limit;
	d->grh.traffic_class = s->grh.traffic_class;
	d->dlid = s->dlid;
	d->sl = s->sl;
	d->src_path_bits = s->src_path_bits;
	d->static_rate = s->static_rate;
	d->is_global = s->is_global;
	d->port_num = s->port_num;
}

static int report(const char *what, const void *got, const void *want, size_t n)
{
	if (memcmp(got, want, n) == 0) {
		printf("PASS %s\n", what);
		return 0;
	}
	const unsigned char *g = got, *w = want;
	size_t i = 0;
	while (g[i] == w[i])
		i++;
	printf("FAIL %s: first difference at byte %zu of %zu (got 0x%02x, want 0x%02x)\n",
	       what, i, n, g[i], w[i]);
	return 1;
}

int main(void)
{
	int fails = 0;

	struct ib_uverbs_ah_attr kah;
	struct ibv_ah_attr ah, ah_want;
	pattern(&kah, sizeof kah, 3);
	memset(&ah, 0xa5, sizeof ah);
	memset(&ah_want, 0xa5, sizeof ah_want);
	ibv_copy_ah_attr_from_kern(&ah, &kah);
	expect_ah(&ah_want, &kah);
	fails += report("ibv_copy_ah_attr_from_kern", &ah, &ah_want, sizeof ah);

	struct ib_uverbs_qp_attr kqp;
	struct ibv_qp_attr qp, w;
	pattern(&kqp, sizeof kqp, 11);
	memset(&qp, 0x5a, sizeof qp);
	memset(&w, 0x5a, sizeof w);
	ibv_copy_qp_attr_from_kern(&qp, &kqp);
	/* qp_state and rate_limit stay the caller's. */
	w.cur_qp_state = kqp.cur_qp_state;
	w.path_mtu = kqp.path_mtu;
	w.path_mig_state = kqp.path_mig_state;
	w.qkey = kqp.qkey;
	w.rq_psn = kqp.rq_psn;
	w.sq_psn = kqp.sq_psn;
	w.dest_qp_num = kqp.dest_qp_num;
	w.qp_access_flags = kqp.qp_access_flags;
	w.cap.max_send_wr = kqp.max_send_wr;
	w.cap.max_recv_wr = kqp.max_recv_wr;
	w.cap.max_send_sge = kqp.max_send_sge;
	w.cap.max_recv_sge = kqp.max_recv_sge;
	w.cap.max_inline_data = kqp.max_inline_data;
	expect_ah(&w.ah_attr, &kqp.ah_attr);
	expect_ah(&w.alt_ah_attr, &kqp.alt_ah_attr);
	w.pkey_index = kqp.pkey_index;
	w.alt_pkey_index = kqp.alt_pkey_index;
	w.en_sqd_async_notify = kqp.en_sqd_async_notify;
	w.sq_draining = kqp.sq_draining;
	w.max_rd_atomic = kqp.max_rd_atomic;
	w.max_dest_rd_atomic = kqp.max_dest_rd_atomic;
	w.min_rnr_timer = kqp.min_rnr_timer;
	w.port_num = kqp.port_num;
	w.timeout = kqp.timeout;
	w.retry_cnt = kqp.retry_cnt;
	w.rnr_retry = kqp.rnr_retry;
	w.alt_port_num = kqp.alt_port_num;
	w.alt_timeout = kqp.alt_timeout;
	fails += report("ibv_copy_qp_attr_from_kern", &qp, &w, sizeof qp);

	struct ib_user_path_rec kpr;
	struct ibv_sa_path_rec pr, pw;
	pattern(&kpr, sizeof kpr, 29);
	memset(&pr, 0x3c, sizeof pr);
	memset(&pw, 0x3c, sizeof pw);
	ibv_copy_path_rec_from_kern(&pr, &kpr);
	memcpy(pw.dgid.raw, kpr.dgid, 16);
	memcpy(pw.sgid.raw, kpr.sgid, 16);
	pw.dlid = kpr.dlid;
	pw.slid = kpr.slid;
	pw.raw_traffic = kpr.raw_traffic;
	pw.flow_label = kpr.flow_label;
	pw.hop_limit = kpr.hop_limit;
	pw.traffic_class = kpr.traffic_class;
	pw.reversible = kpr.reversible;
	pw.numb_path = kpr.numb_path;
	pw.pkey = kpr.pkey;
	pw.sl = kpr.sl;
	pw.mtu_selector = kpr.mtu_selector;
	pw.mtu = kpr.mtu;
	pw.rate_selector = kpr.rate_selector;
	pw.rate = kpr.rate;
	pw.packet_life_time_selector = kpr.packet_life_time_selector;
	pw.packet_life_time = kpr.packet_life_time;
	pw.preference = kpr.preference;
	fails += report("ibv_copy_path_rec_from_kern", &pr, &pw, sizeof pr);
	return fails ? 1 : 0;
}
