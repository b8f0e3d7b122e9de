//! Typed posting sessions (`QueuePair::start_wr`, the `ibv_qp_ex` /
//! `ibv_wr_*` API of `uverbs::qp_ex`) against the real kernel: every RC
//! operation's builder, UC and UD sessions, the checks made once per
//! session and per request, and abort. Each test body is generic over the
//! provider and runs on the device's own (rxe in the test guest; mlx5 on a
//! host with a ConnectX named by `UVERBS_TEST_DEVICE`), the way a program
//! written once for both would.

use uverbs::{
    qp_ex::{Mlx5, ProviderKind, Rc, Rxe, Uc, Ud},
    Context, PostErrorKind, QpType, RecvWr, UdDest, WcFlags, WcOpcode, WcStatus,
};

use crate::support::*;

/// Runs `$body::<P>()` for the provider of the test device.
macro_rules! on_device_provider {
    ($body:ident) => {
        match open().provider_name() {
            "rxe" => $body::<Rxe>(),
            "mlx5" => $body::<Mlx5>(),
            other => panic!("no typed sessions for provider {other}"),
        }
    };
}

/// The provider that is not `P` (for the wrong-provider check).
fn other_provider_name(ctx: &Context) -> &'static str {
    if ctx.provider_name() == "rxe" {
        "mlx5"
    } else {
        "rxe"
    }
}

#[test]
fn every_rc_operation_of_a_typed_session_executes() {
    fn body<P: ProviderKind>() {
        let mut p = pair(QpType::Rc, 16, 7);
        let local = mr(&p.pd, 4096);
        let remote = mr(&p.pd, 4096);
        local.write(0, b"0123456789abcdefghij").unwrap();
        remote.write(1024, b"read me!and me!!").unwrap();
        remote.write(2048, &40u64.to_le_bytes()).unwrap();
        remote.write(2056, &7u64.to_le_bytes()).unwrap();
        for i in 0..3u64 {
            let sge = [remote.sge(3072 + 256 * i as usize, 256).unwrap()];
            p.b.post_recv(&[RecvWr::new(70 + i, &sge)]).unwrap();
        }
        let (ra, rkey) = (remote.addr(), remote.rkey());
        let l = |off: usize, len: u32| local.sge(off, len).unwrap();
        let mut s = p.a.start_wr::<Rc, P>().unwrap();
        s.rdma_write(rkey, ra)
            .wr_id(1)
            .sge_list(&[l(0, 10), l(10, 10)])
            .unwrap();
        s.rdma_write_imm(rkey, ra + 64, 0xabcd)
            .wr_id(2)
            .inline(b"inline write")
            .unwrap();
        s.rdma_read(rkey, ra + 1024)
            .wr_id(3)
            .sge_list(&[l(512, 8), l(600, 8)])
            .unwrap();
        s.atomic_cmp_swp(rkey, ra + 2048, 40, 99)
            .wr_id(4)
            .sge(l(768, 8))
            .unwrap();
        s.atomic_fetch_add(rkey, ra + 2056, 5)
            .wr_id(5)
            .sge(l(776, 8))
            .unwrap();
        s.send().wr_id(6).sge(l(0, 10)).unwrap();
        s.send_imm(0xfeed)
            .wr_id(7)
            .solicited()
            .inline(b"imm!")
            .unwrap();
        s.complete().unwrap();
        let got: Vec<_> = wait(&mut p.cq_a, 7)
            .iter()
            .map(|c| (c.wr_id, c.status, c.opcode))
            .collect();
        let ok = WcStatus::SUCCESS;
        assert_eq!(
            got,
            [
                (1, ok, WcOpcode::RDMA_WRITE),
                (2, ok, WcOpcode::RDMA_WRITE),
                (3, ok, WcOpcode::RDMA_READ),
                (4, ok, WcOpcode::COMP_SWAP),
                (5, ok, WcOpcode::FETCH_ADD),
                (6, ok, WcOpcode::SEND),
                (7, ok, WcOpcode::SEND),
            ]
        );
        let mut buf = [0u8; 20];
        remote.read(0, &mut buf).unwrap();
        assert_eq!(&buf, b"0123456789abcdefghij");
        let mut buf = [0u8; 12];
        remote.read(64, &mut buf).unwrap();
        assert_eq!(&buf, b"inline write");
        assert_eq!(&local.read_u64(512).unwrap().to_le_bytes(), b"read me!");
        assert_eq!(&local.read_u64(600).unwrap().to_le_bytes(), b"and me!!");
        assert_eq!(local.read_u64(768).unwrap(), 40, "cmp-swap's old value");
        assert_eq!(remote.read_u64(2048).unwrap(), 99);
        assert_eq!(local.read_u64(776).unwrap(), 7, "fetch-add's old value");
        assert_eq!(remote.read_u64(2056).unwrap(), 12);
        let r = wait(&mut p.cq_b, 3);
        let got: Vec<_> = r
            .iter()
            .map(|c| (c.wr_id, c.opcode, c.byte_len, c.imm_data))
            .collect();
        assert_eq!(
            got,
            [
                (70, WcOpcode::RECV_RDMA_WITH_IMM, 12, 0xabcd),
                (71, WcOpcode::RECV, 10, 0),
                (72, WcOpcode::RECV, 4, 0xfeed),
            ]
        );
        assert!(r[2].wc_flags.contains(WcFlags::WITH_IMM));
    }
    on_device_provider!(body);
}

#[test]
fn uc_and_ud_typed_sessions_carry_their_transports_operations() {
    fn body<P: ProviderKind>() {
        let mut p = pair(QpType::Uc, 8, 7);
        let buf = mr(&p.pd, 4096);
        buf.write(0, b"uc write").unwrap();
        p.b.post_recv(&[RecvWr::new(9, &[buf.sge(1024, 64).unwrap()])])
            .unwrap();
        let mut s = p.a.start_wr::<Uc, P>().unwrap();
        s.rdma_write(buf.rkey(), buf.addr() + 512)
            .wr_id(1)
            .sge(buf.sge(0, 8).unwrap())
            .unwrap();
        s.send().wr_id(2).inline(b"uc send").unwrap();
        s.complete().unwrap();
        let ids: Vec<_> = wait(&mut p.cq_a, 2)
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect();
        assert_eq!(ids, [(1, WcStatus::SUCCESS), (2, WcStatus::SUCCESS)]);
        let r = wait(&mut p.cq_b, 1);
        assert_eq!((r[0].wr_id, r[0].byte_len), (9, 7));
        assert_eq!(&buf.read_u64(512).unwrap().to_le_bytes(), b"uc write");

        let mut u = pair(QpType::Ud, 8, 7);
        let ah = ah_to_own_gid(&u);
        let buf = mr(&u.pd, 4096);
        buf.write(0, b"datagram").unwrap();
        for i in 0..2u64 {
            let sge = [buf.sge(1024 + 256 * i as usize, 256).unwrap()];
            u.b.post_recv(&[RecvWr::new(20 + i, &sge)]).unwrap();
        }
        let dest = UdDest::new(&ah, u.b.qp_num(), crate::qp_connect::QKEY);
        let mut s = u.a.start_wr::<Ud, P>().unwrap();
        s.send_to(dest)
            .wr_id(1)
            .sge(buf.sge(0, 8).unwrap())
            .unwrap();
        s.send_imm_to(dest, 77).wr_id(2).inline(b"dg").unwrap();
        s.complete().unwrap();
        let sent = wait(&mut u.cq_a, 2);
        assert!(
            sent.iter().all(|c| c.status == WcStatus::SUCCESS),
            "{sent:?}"
        );
        let r = wait(&mut u.cq_b, 2);
        let got: Vec<_> = r
            .iter()
            .map(|c| (c.wr_id, c.byte_len, c.src_qp, c.imm_data))
            .collect();
        // Each UD receive starts with the 40-byte GRH.
        assert_eq!(got, [(20, 48, u.a.qp_num(), 0), (21, 42, u.a.qp_num(), 77)]);
        let mut b = [0u8; 8];
        buf.read(1024 + 40, &mut b).unwrap();
        assert_eq!(&b, b"datagram");
    }
    on_device_provider!(body);
}

#[test]
fn a_typed_session_refuses_what_does_not_fit_with_nothing_posted() {
    fn body<P: ProviderKind>() {
        let mut p = pair(QpType::Rc, 4, 7);
        let e = p.a.start_wr::<Uc, P>().unwrap_err();
        assert_eq!(
            e.kind,
            PostErrorKind::WrongQpType {
                qp: QpType::Rc,
                session: QpType::Uc
            }
        );
        let other = other_provider_name(&p.ctx);
        let e = if other == "mlx5" {
            p.a.start_wr::<Rc, Mlx5>().unwrap_err()
        } else {
            p.a.start_wr::<Rc, Rxe>().unwrap_err()
        };
        assert_eq!(
            e.kind,
            PostErrorKind::WrongProvider {
                qp: p.ctx.provider_name(),
                session: other
            }
        );
        let buf = mr(&p.pd, 4096);
        let one = buf.sge(0, 8).unwrap();
        for i in 0..2u64 {
            let sge = [buf.sge(1024 + 64 * i as usize, 64).unwrap()];
            p.b.post_recv(&[RecvWr::new(i, &sge)]).unwrap();
        }
        // The pair's QPs take 4 SGEs and 64 bytes inline.
        let mut s = p.a.start_wr::<Rc, P>().unwrap();
        s.send().wr_id(1).sge(one).unwrap();
        let e = s.send().wr_id(2).sge_list(&[one; 5]).unwrap_err();
        assert_eq!(e.index, 1);
        assert!(
            matches!(e.kind, PostErrorKind::TooManySges { given: 5, .. }),
            "{e}"
        );
        let e = s.send().wr_id(3).inline(&[7; 4096]).unwrap_err();
        assert!(
            matches!(e.kind, PostErrorKind::InlineTooLong { given: 4096, .. }),
            "{e}"
        );
        s.send().wr_id(4).sge(one.length(4)).unwrap();
        s.complete().unwrap();
        let ids: Vec<_> = wait(&mut p.cq_a, 2).iter().map(|c| c.wr_id).collect();
        assert_eq!(ids, [1, 4]);
        let r = wait(&mut p.cq_b, 2);
        assert_eq!((r[0].byte_len, r[1].byte_len), (8, 4));

        // An aborted session never reaches the kernel, and its slots carry
        // the next one's requests.
        let (ra, rkey) = (buf.addr(), buf.rkey());
        buf.write(0, b"AAAAAAAA").unwrap();
        buf.write(8, b"BBBBBBBB").unwrap();
        for lap in 0..6u64 {
            let mut s = p.a.start_wr::<Rc, P>().unwrap();
            for k in 0..4 {
                s.rdma_write(rkey, ra + 2048 + 8 * k)
                    .sge(buf.sge(0, 8).unwrap())
                    .unwrap();
            }
            if lap % 2 == 0 {
                s.abort();
            } else {
                drop(s);
            }
            let mut s = p.a.start_wr::<Rc, P>().unwrap();
            for k in 0..4 {
                let wr = s.rdma_write(rkey, ra + 3072 + 8 * k).wr_id(lap * 4 + k);
                if k == 3 { wr } else { wr.unsignaled() }
                    .sge(buf.sge(8, 8).unwrap())
                    .unwrap();
            }
            s.complete().unwrap();
            let c = wait(&mut p.cq_a, 1);
            assert_eq!((c[0].wr_id, c[0].status), (lap * 4 + 3, WcStatus::SUCCESS));
        }
        for k in 0..4 {
            assert_eq!(
                buf.read_u64(2048 + 8 * k).unwrap(),
                0,
                "aborted write {k} ran"
            );
            assert_eq!(
                &buf.read_u64(3072 + 8 * k).unwrap().to_le_bytes(),
                b"BBBBBBBB"
            );
        }
    }
    on_device_provider!(body);
}
