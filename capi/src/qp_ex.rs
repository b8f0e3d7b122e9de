//! ibv_qp_ex: ibv_qp_to_qp_ex and the wr_* ops.


