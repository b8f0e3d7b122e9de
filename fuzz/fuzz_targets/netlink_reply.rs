//! Netlink replies come from the kernel; parsing them must never panic or
//! read out of bounds, whatever the lengths claim.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uverbs::netlink;

fuzz_target!(|data: &[u8]| {
    let _ = netlink::msg_type(data);
    for attr in netlink::attrs(data) {
        let _ = (attr.u8(), attr.u32(), attr.u64(), attr.str());
        assert!(attr.payload.len() <= data.len());
    }
});
