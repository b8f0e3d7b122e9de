//! The context's async events: ibv_get_async_event, ibv_ack_async_event.


