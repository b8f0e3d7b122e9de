//! The channel an id is on, for the C library's `id->channel`
//! (`rdma_cm_id.channel`): a synchronous id's private channel is not the
//! program's, yet librdmacm hands out its `struct rdma_event_channel`
//! (`ucma_create_id` makes one for a NULL channel).

use super::{CmId, EventChannel};

impl CmId {
    /// The event channel the id's commands and events go through now (for
    /// a synchronous id, its private channel: read no events from it, the
    /// id's calls do). A handle to the same channel, not a new one.
    pub fn event_channel(&self) -> EventChannel {
        EventChannel {
            inner: self.channel(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        os::fd::{AsFd, AsRawFd},
        sync::Arc,
    };

    use crate::{
        cm::{CmId, EventChannel, PortSpace},
        sys::{fake::FakeKernel, Kernel},
    };

    #[test]
    fn an_id_reports_the_channel_it_is_on() {
        let fake = Arc::new(FakeKernel::new());
        // CREATE_ID answers id 7 (its response is the id, u32).
        fake.on_ucma(|_, resp| {
            resp.fill(0);
            if resp.len() >= 4 {
                resp[..4].copy_from_slice(&7u32.to_ne_bytes());
            }
            Ok(())
        });
        let k: Arc<dyn Kernel> = fake;
        let ch = EventChannel::open_with(k.clone()).unwrap();
        let id = ch.create_id(PortSpace::Tcp).unwrap();
        assert_eq!(
            id.event_channel().as_fd().as_raw_fd(),
            ch.as_fd().as_raw_fd()
        );
        let s = CmId::create_sync_with(k, PortSpace::Tcp).unwrap();
        assert_ne!(
            s.event_channel().as_fd().as_raw_fd(),
            ch.as_fd().as_raw_fd()
        );
        assert_eq!(
            s.event_channel().as_fd().as_raw_fd(),
            s.event_channel().as_fd().as_raw_fd()
        );
    }
}
