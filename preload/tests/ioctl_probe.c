/*
 * Raw uverbs ioctls against the shim, checked against what Linux 6.1's
 * uverbs core answers (drivers/infiniband/core/uverbs_ioctl.c,
 * uverbs_std_types_device.c), and plain write() commands against what
 * its ib_uverbs_write (uverbs_main.c) answers: the shim's decoder, not
 * libibverbs, is under test here. Run with scripts/on-model.sh; exits 0 when every case holds.
 *
 * The uapi structs are written out (include/uapi/rdma/rdma_user_ioctl_cmds.h)
 * so the probe needs no kernel headers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct attr {
	uint16_t attr_id, len, flags, attr_data;
	uint64_t data;
};
struct hdr {
	uint16_t length, object_id, method_id, num_attrs;
	uint64_t reserved1;
	uint32_t driver_id, reserved2;
	struct attr attrs[8];
};
struct ioctl_hdr { /* struct ib_uverbs_ioctl_hdr without its attributes */
	uint16_t length, object_id, method_id, num_attrs;
	uint64_t reserved1;
	uint32_t driver_id, reserved2;
};
#define RDMA_VERBS_IOCTL _IOWR(0x1b, 1, struct ioctl_hdr)
#define F_MANDATORY 1
#define F_VALID_OUTPUT 2
#define DRIVER_MLX5 1

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL: " __VA_ARGS__); printf("\n"); } \
	else { printf("ok: " __VA_ARGS__); printf("\n"); } } while (0)

static int call(int fd, struct hdr *h, uint16_t obj, uint16_t meth, int n)
{
	h->length = 24 + 16 * n;
	h->object_id = obj;
	h->method_id = meth;
	h->num_attrs = n;
	if (!h->driver_id)
		h->driver_id = DRIVER_MLX5;
	return ioctl(fd, RDMA_VERBS_IOCTL, h) ? errno : 0;
}

int main(void)
{
	int fd = open("/dev/infiniband/uverbs0", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		perror("open /dev/infiniband/uverbs0");
		return 1;
	}
	struct hdr h;
	unsigned char resp[48];

	/* QUERY_PORT (DEVICE 0, method 2): PORT_NUM const in, RESP out
	 * (ib_uverbs_query_port_resp_ex: state at byte 26). */
	memset(&h, 0, sizeof h);
	memset(resp, 0xee, sizeof resp);
	h.attrs[0] = (struct attr){ 0, 8, F_MANDATORY, 0, 1 };
	h.attrs[1] = (struct attr){ 1, sizeof resp, F_MANDATORY, 0, (uintptr_t)resp };
	int r = call(fd, &h, 0, 2, 2);
	CHECK(r == 0 && (h.attrs[1].flags & F_VALID_OUTPUT) && resp[26] == 4,
	      "QUERY_PORT answers, marks RESP valid, state ACTIVE (%d, flags %#x, state %u)",
	      r, h.attrs[1].flags, resp[26]);

	/* An attribute the method does not know: mandatory fails, optional is dropped. */
	memset(&h, 0, sizeof h);
	h.attrs[0] = (struct attr){ 0, 8, F_MANDATORY, 0, 1 };
	h.attrs[1] = (struct attr){ 1, sizeof resp, F_MANDATORY, 0, (uintptr_t)resp };
	h.attrs[2] = (struct attr){ 0x55, 8, F_MANDATORY, 0, 0 };
	r = call(fd, &h, 0, 2, 3);
	CHECK(r == EPROTONOSUPPORT, "an unknown mandatory attribute: EPROTONOSUPPORT (%d)", r);
	h.attrs[2].flags = 0;
	r = call(fd, &h, 0, 2, 3);
	CHECK(r == 0, "an unknown optional attribute is ignored (%d)", r);

	/* A mandatory attribute of the spec missing: EINVAL. */
	memset(&h, 0, sizeof h);
	h.attrs[0] = (struct attr){ 0, 8, F_MANDATORY, 0, 1 };
	r = call(fd, &h, 0, 2, 1);
	CHECK(r == EINVAL, "QUERY_PORT without its RESP: EINVAL (%d)", r);

	/* The same attribute twice: EINVAL. */
	memset(&h, 0, sizeof h);
	h.attrs[0] = (struct attr){ 0, 8, F_MANDATORY, 0, 1 };
	h.attrs[1] = (struct attr){ 1, sizeof resp, F_MANDATORY, 0, (uintptr_t)resp };
	h.attrs[2] = h.attrs[0];
	r = call(fd, &h, 0, 2, 3);
	CHECK(r == EINVAL, "an attribute twice: EINVAL (%d)", r);

	/* An unknown object or method: EPROTONOSUPPORT. */
	memset(&h, 0, sizeof h);
	r = call(fd, &h, 0x77, 0, 0);
	CHECK(r == EPROTONOSUPPORT, "an unknown object: EPROTONOSUPPORT (%d)", r);

	/* Another driver's id: EINVAL; a length that is not the attributes': EINVAL;
	 * reserved bits: EPROTONOSUPPORT. */
	memset(&h, 0, sizeof h);
	h.driver_id = 2;
	h.attrs[0] = (struct attr){ 0, 8, F_MANDATORY, 0, 1 };
	h.attrs[1] = (struct attr){ 1, sizeof resp, F_MANDATORY, 0, (uintptr_t)resp };
	r = call(fd, &h, 0, 2, 2);
	CHECK(r == EINVAL, "another driver's id: EINVAL (%d)", r);
	h.driver_id = DRIVER_MLX5;
	h.length = 24 + 16;
	r = ioctl(fd, RDMA_VERBS_IOCTL, &h) ? errno : 0;
	CHECK(r == EINVAL, "a header length that is not the attributes': EINVAL (%d)", r);
	h.reserved1 = 1;
	r = call(fd, &h, 0, 2, 2);
	CHECK(r == EPROTONOSUPPORT, "reserved bits: EPROTONOSUPPORT (%d)", r);

	/* INVOKE_WRITE (DEVICE 0, method 0): the libibverbs probe gets ENOSPC;
	 * the legacy QUERY_DEVICE (1) answers ib_uverbs_query_device_resp. */
	memset(&h, 0, sizeof h);
	h.attrs[0] = (struct attr){ 2, 8, F_MANDATORY, 0, 1 };
	r = call(fd, &h, 0, 0, 1);
	CHECK(r == ENOSPC, "INVOKE_WRITE QUERY_DEVICE without buffers: ENOSPC (%d)", r);
	unsigned char dev[176];
	uint64_t core_in = 0;
	memset(dev, 0, sizeof dev);
	h.attrs[1] = (struct attr){ 0, 8, F_MANDATORY, 0, core_in };
	h.attrs[2] = (struct attr){ 1, sizeof dev, F_MANDATORY, 0, (uintptr_t)dev };
	r = call(fd, &h, 0, 0, 3);
	uint32_t part;
	memcpy(&part, dev + 44, 4);
	CHECK(r == 0 && part == 4119 && (h.attrs[2].flags & F_VALID_OUTPUT),
	      "INVOKE_WRITE QUERY_DEVICE: vendor_part_id %u (%d)", part, r);
	h.attrs[0].data = 0x99;
	r = call(fd, &h, 0, 0, 3);
	CHECK(r == EOPNOTSUPP, "INVOKE_WRITE of an unknown command: EOPNOTSUPP (%d)", r);

	/* Another ioctl on the command fd: ENOTTY. */
	int n;
	r = ioctl(fd, FIONREAD, &n) ? errno : 0;
	CHECK(r == ENOTTY, "a non-uverbs ioctl: ENOTTY (%d)", r);

	/* A plain write() command (uverbs_main.c ib_uverbs_write): the legacy
	 * ib_uverbs_cmd_hdr {command, in_words, out_words} counted in 4 bytes,
	 * the request starting with the response pointer; the extended one with
	 * ib_uverbs_ex_cmd_hdr {response, provider_in/out_words, reserved} and
	 * sizes in words of 8. A successful write returns its count. */
	struct { uint32_t command; uint16_t in_words, out_words; uint64_t response; } qd;
	memset(dev, 0, sizeof dev);
	qd = (typeof(qd)){ 1, sizeof qd / 4, sizeof dev / 4, (uintptr_t)dev };
	ssize_t w = write(fd, &qd, sizeof qd);
	memcpy(&part, dev + 44, 4);
	CHECK(w == (ssize_t)sizeof qd && part == 4119,
	      "write() QUERY_DEVICE: vendor_part_id %u (%zd)", part, w);
	qd.out_words = sizeof dev / 4 - 1;
	r = write(fd, &qd, sizeof qd) < 0 ? errno : 0;
	CHECK(r == ENOSPC, "write() QUERY_DEVICE with a short response: ENOSPC (%d)", r);
	qd.out_words = sizeof dev / 4;
	qd.in_words = 3;
	r = write(fd, &qd, sizeof qd) < 0 ? errno : 0;
	CHECK(r == EINVAL, "write() with in_words not the count: EINVAL (%d)", r);
	r = write(fd, &qd, 4) < 0 ? errno : 0;
	CHECK(r == EINVAL, "write() shorter than the header: EINVAL (%d)", r);
	qd = (typeof(qd)){ 0x99, sizeof qd / 4, 0, 0 };
	r = write(fd, &qd, sizeof qd) < 0 ? errno : 0;
	CHECK(r == EOPNOTSUPP, "write() of an unknown command: EOPNOTSUPP (%d)", r);
	struct {
		uint32_t command; uint16_t in_words, out_words;
		uint64_t response; uint16_t provider_in_words, provider_out_words; uint32_t reserved;
		uint32_t comp_mask, req_reserved;
	} ex;
	unsigned char exdev[304];
	memset(exdev, 0, sizeof exdev);
	ex = (typeof(ex)){ 0x80000001, 1, sizeof exdev / 8, (uintptr_t)exdev, 0, 0, 0, 0, 0 };
	w = write(fd, &ex, sizeof ex);
	memcpy(&part, exdev + 44, 4);
	CHECK(w == (ssize_t)sizeof ex && part == 4119,
	      "write() EX_QUERY_DEVICE: vendor_part_id %u (%zd)", part, w);
	ex.reserved = 1;
	r = write(fd, &ex, sizeof ex) < 0 ? errno : 0;
	CHECK(r == EINVAL, "write() EX with cmd_hdr_reserved: EINVAL (%d)", r);
	ex.reserved = 0;
	ex.response = 0;
	r = write(fd, &ex, sizeof ex) < 0 ? errno : 0;
	CHECK(r == EINVAL, "write() EX with out_words but no response: EINVAL (%d)", r);

	close(fd);
	printf("ioctl_probe: %s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
