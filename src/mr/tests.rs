//! Unit tests of `mr.rs`.

use super::*;

/// Every flag is the kernel's `IB_UVERBS_ACCESS_*` (`<rdma/ib_user_ioctl_verbs.h>`,
/// through `uverbs-abi`); the flush flags, newer than those headers,
/// are libibverbs' (`libibverbs/verbs.h`, `enum ibv_access_flags`:
/// `IBV_ACCESS_FLUSH_GLOBAL = (1 << 8)`, `IBV_ACCESS_FLUSH_PERSISTENT = (1 << 9)`).
#[test]
fn access_flags_are_the_c_values_and_keep_unknown_bits() {
    let kernel = [
        (AccessFlags::LOCAL_WRITE, abi::IB_UVERBS_ACCESS_LOCAL_WRITE),
        (
            AccessFlags::REMOTE_WRITE,
            abi::IB_UVERBS_ACCESS_REMOTE_WRITE,
        ),
        (AccessFlags::REMOTE_READ, abi::IB_UVERBS_ACCESS_REMOTE_READ),
        (
            AccessFlags::REMOTE_ATOMIC,
            abi::IB_UVERBS_ACCESS_REMOTE_ATOMIC,
        ),
        (AccessFlags::MW_BIND, abi::IB_UVERBS_ACCESS_MW_BIND),
        (AccessFlags::ZERO_BASED, abi::IB_UVERBS_ACCESS_ZERO_BASED),
        (AccessFlags::ON_DEMAND, abi::IB_UVERBS_ACCESS_ON_DEMAND),
        (AccessFlags::HUGETLB, abi::IB_UVERBS_ACCESS_HUGETLB),
        (
            AccessFlags::RELAXED_ORDERING,
            abi::IB_UVERBS_ACCESS_RELAXED_ORDERING,
        ),
    ];
    for (flag, c) in kernel {
        assert_eq!(flag.bits(), c, "{flag:?}");
    }
    assert_eq!(AccessFlags::FLUSH_GLOBAL.bits(), 1 << 8);
    assert_eq!(AccessFlags::FLUSH_PERSISTENT.bits(), 1 << 9);
    let named = <AccessFlags as bitflags::Flags>::FLAGS
        .iter()
        .filter(|f| f.is_named())
        .count();
    assert_eq!(named, 11, "every flag is tested");
    let odd = 1 << 21 | 1 << 30 | 1;
    assert_eq!(AccessFlags::from_bits_retain(odd).bits(), odd);
    assert_eq!(AccessFlags::from_bits(odd).map(|f| f.bits()), Some(odd));
}
