/* preload/tests/qp_sizing.c: creates a QP per row of stdin (a table of
 * types, creation paths, send operations, creation flags and capacities:
 * preload/tests/qp_sizing.rows) and prints, per row, the errno or the
 * capacities the QP reports. Run over Debian's libibverbs + libmlx5 on the
 * device model it is the oracle of QP sizing; scripts/qp-sizing-model.sh
 * runs it over ours too and compares the lines. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <infiniband/verbs.h>

int main(int argc, char **argv)
{
	int n;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (!l || !n) { fprintf(stderr, "no device\n"); return 2; }
	struct ibv_context *c = ibv_open_device(l[0]);
	if (!c) { perror("open"); return 2; }
	struct ibv_pd *pd = ibv_alloc_pd(c);
	struct ibv_cq *cq = ibv_create_cq(c, 16, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	if (!pd || !cq || !srq) { perror("setup"); return 2; }
	char line[512];
	/* A row: type srq ex ops(hex) flags(hex) send_wr recv_wr send_sge
	 * recv_sge inline; srq: on an SRQ; ex: through ibv_create_qp_ex,
	 * with ops / flags in the mask when not 0. */
	while (fgets(line, sizeof line, stdin)) {
		unsigned type, use_srq, ex, flags;
		unsigned long long ops;
		uint32_t sw, rw, ss, rs, il;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (sscanf(line, "%u %u %u %llx %x %u %u %u %u %u", &type, &use_srq, &ex, &ops, &flags,
			   &sw, &rw, &ss, &rs, &il) != 10) {
			fprintf(stderr, "bad row: %s", line);
			return 2;
		}
		struct ibv_qp_init_attr_ex a = {
			.qp_type = type, .send_cq = cq, .recv_cq = cq,
			.srq = use_srq ? srq : NULL,
			.cap = { sw, rw, ss, rs, il },
			.comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
		};
		if (ops) {
			a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			a.send_ops_flags = ops;
		}
		if (flags) {
			a.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
			a.create_flags = flags;
		}
		struct ibv_qp *qp;
		errno = 0;
		if (ex) {
			qp = ibv_create_qp_ex(c, &a);
		} else {
			struct ibv_qp_init_attr b = {
				.qp_type = type, .send_cq = cq, .recv_cq = cq,
				.srq = a.srq, .cap = a.cap,
			};
			qp = ibv_create_qp(pd, &b);
			a.cap = b.cap;
		}
		line[strcspn(line, "\n")] = 0;
		if (!qp) {
			printf("%-60s -> errno %d\n", line, errno);
			continue;
		}
		printf("%-60s -> wr %u/%u sge %u/%u inline %u\n", line, a.cap.max_send_wr,
		       a.cap.max_recv_wr, a.cap.max_send_sge, a.cap.max_recv_sge,
		       a.cap.max_inline_data);
		ibv_destroy_qp(qp);
	}
	return 0;
}
