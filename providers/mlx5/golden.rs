//! Golden tests of the WQE encoders and the CQE decoder against rdma-core's
//! public `infiniband/mlx5dv.h` (Debian's libibverbs-dev; `scripts/test.sh`
//! fetches it with `apt-get download` + `dpkg -x` into a cache and sets
//! `UVERBS_MLX5DV_INCLUDE`).
//!
//! A C program, compiled here at test time, fills segments with the
//! header's own inline helpers (`mlx5dv_set_ctrl_seg`,
//! `mlx5dv_x86_set_ctrl_seg`, `mlx5dv_set_data_seg`,
//! `mlx5dv_x86_set_data_seg`, `mlx5dv_set_dgram_seg`) and reads CQEs with its
//! accessors (`mlx5dv_get_cqe_owner`/`_se`/`_format`/`_opcode`), over
//! thousands of random inputs; our encoders and decoder must agree byte for
//! byte. The segments the header has no helper for (remote address, atomic,
//! inline, SRQ next, the CQE fields, the error CQE) are filled in C through
//! the public structs' fields, and the constants come from the header.
//!
//! Traps (shared/reference/mlx5.md): `mlx5dv_set_ctrl_seg` leaves bytes
//! 9..10 alone (the program zeroes the struct first); the x86 variants need
//! SSSE3; `mlx5dv_set_dgram_seg` stores the key with `htobe64`, so a Q_Key
//! goes in as `qkey << 32`.

use std::{
    env,
    fmt::Write as _,
    io::Write as _,
    path::PathBuf,
    process::{Command, Stdio},
};

use super::{
    cqe,
    cqe::{Cqe64, CqeView},
    wqe,
    wqe::Av,
};

const CASES: usize = 3000;

/// The C side: one command per input line, the bytes out as hex.
const PROGRAM: &str = r#"
#include <infiniband/mlx5dv.h>
#include <stdio.h>
#include <string.h>
#include <stdint.h>

static void hex(const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) printf("%02x", b[i]);
    printf("\n");
}

int main(void) {
    char op[16];
    printf("C %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %u %u %u %d %d\n",
        MLX5_OPCODE_SEND, MLX5_OPCODE_SEND_IMM, MLX5_OPCODE_RDMA_WRITE, MLX5_OPCODE_RDMA_WRITE_IMM,
        MLX5_OPCODE_RDMA_READ, MLX5_OPCODE_ATOMIC_CS, MLX5_OPCODE_ATOMIC_FA,
        MLX5_WQE_CTRL_FENCE, MLX5_WQE_CTRL_CQ_UPDATE, MLX5_WQE_CTRL_SOLICITED,
        MLX5_CQE_REQ, MLX5_CQE_RESP_WR_IMM, MLX5_CQE_RESP_SEND, MLX5_CQE_RESP_SEND_IMM,
        MLX5_CQE_RESP_SEND_INV, MLX5_CQE_REQ_ERR, MLX5_CQE_RESP_ERR, MLX5_CQE_INVALID,
        MLX5_CQE_SYNDROME_LOCAL_PROT_ERR, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR,
        MLX5_CQE_SYNDROME_WR_FLUSH_ERR, (unsigned)MLX5_INLINE_SEG, (unsigned)MLX5_INVALID_LKEY,
        (unsigned)MLX5_EXTENDED_UD_AV, MLX5_SEND_WQE_BB, MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR);
    printf("S %zu %zu %zu %zu %zu %zu %zu %zu\n", sizeof(struct mlx5_wqe_ctrl_seg),
        sizeof(struct mlx5_wqe_data_seg), sizeof(struct mlx5_wqe_raddr_seg),
        sizeof(struct mlx5_wqe_atomic_seg), sizeof(struct mlx5_wqe_av),
        sizeof(struct mlx5_wqe_srq_next_seg), sizeof(struct mlx5_cqe64), sizeof(struct mlx5_err_cqe));
    fflush(stdout);
    while (scanf("%15s", op) == 1) {
        if (!strcmp(op, "ctrl") || !strcmp(op, "ctrl86")) {
            unsigned pi, opc, opmod, qpn, fm, ds, imm;
            scanf("%u %u %u %u %u %u %u", &pi, &opc, &opmod, &qpn, &fm, &ds, &imm);
            struct mlx5_wqe_ctrl_seg s;
            memset(&s, 0, sizeof s);
            if (op[4] == '8')
                mlx5dv_x86_set_ctrl_seg(&s, pi, opc, opmod, qpn, fm, ds, 0, imm);
            else
                mlx5dv_set_ctrl_seg(&s, pi, opc, opmod, qpn, fm, ds, 0, imm);
            hex(&s, sizeof s);
        } else if (!strcmp(op, "data") || !strcmp(op, "data86")) {
            unsigned len, lkey; unsigned long long addr;
            scanf("%u %u %llu", &len, &lkey, &addr);
            struct mlx5_wqe_data_seg s;
            memset(&s, 0, sizeof s);
            if (op[4] == '8') mlx5dv_x86_set_data_seg(&s, len, lkey, addr);
            else mlx5dv_set_data_seg(&s, len, lkey, addr);
            hex(&s, sizeof s);
        } else if (!strcmp(op, "raddr")) {
            unsigned long long addr; unsigned rkey;
            scanf("%llu %u", &addr, &rkey);
            struct mlx5_wqe_raddr_seg s;
            memset(&s, 0, sizeof s);
            s.raddr = htobe64(addr); s.rkey = htobe32(rkey);
            hex(&s, sizeof s);
        } else if (!strcmp(op, "atomic")) {
            unsigned long long sa, cmp;
            scanf("%llu %llu", &sa, &cmp);
            struct mlx5_wqe_atomic_seg s;
            memset(&s, 0, sizeof s);
            s.swap_add = htobe64(sa); s.compare = htobe64(cmp);
            hex(&s, sizeof s);
        } else if (!strcmp(op, "inline")) {
            unsigned len;
            scanf("%u", &len);
            struct mlx5_wqe_inl_data_seg s;
            s.byte_count = htobe32(len | MLX5_INLINE_SEG);
            hex(&s, sizeof s);
        } else if (!strcmp(op, "srqnext")) {
            unsigned next;
            scanf("%u", &next);
            struct mlx5_wqe_srq_next_seg s;
            memset(&s, 0, sizeof s);
            s.next_wqe_index = htobe16(next);
            hex(&s, sizeof s);
        } else if (!strcmp(op, "dgram")) {
            unsigned long long key; unsigned dqp, ext, srsl, fl, rlid, tclass, hop, gfl;
            uint8_t rmac[6], rgid[16];
            scanf("%llu %u %u %u %u %u %u %u %u", &key, &dqp, &ext, &srsl, &fl, &rlid, &tclass, &hop, &gfl);
            for (int i = 0; i < 6; i++) { unsigned v; scanf("%u", &v); rmac[i] = v; }
            for (int i = 0; i < 16; i++) { unsigned v; scanf("%u", &v); rgid[i] = v; }
            struct mlx5_wqe_datagram_seg s;
            memset(&s, 0, sizeof s);
            mlx5dv_set_dgram_seg(&s, key, dqp, ext, srsl, fl, rlid, rmac, tclass, hop, gfl, rgid);
            hex(&s, sizeof s);
        } else if (!strcmp(op, "cqe")) {
            unsigned v[12];
            for (int i = 0; i < 12; i++) scanf("%u", &v[i]);
            struct mlx5_cqe64 c;
            memset(&c, 0, sizeof c);
            c.ml_path = v[0]; c.slid = htobe16(v[1]); c.flags_rqpn = htobe32(v[2]);
            c.srqn_uidx = htobe32(v[3]); c.imm_inval_pkey = htobe32(v[4]);
            c.byte_cnt = htobe32(v[5]); c.sop_drop_qpn = htobe32(v[6]);
            c.wqe_counter = htobe16(v[7]); c.op_own = v[8];
            c.timestamp = htobe64((unsigned long long)v[9] << 32 | v[10]);
            printf("%u %u %u %u ", mlx5dv_get_cqe_owner(&c), mlx5dv_get_cqe_se(&c),
                   mlx5dv_get_cqe_format(&c), mlx5dv_get_cqe_opcode(&c));
            hex(&c, sizeof c);
        } else if (!strcmp(op, "errcqe")) {
            unsigned vendor, synd, qpn, ctr;
            scanf("%u %u %u %u", &vendor, &synd, &qpn, &ctr);
            struct mlx5_err_cqe e;
            memset(&e, 0, sizeof e);
            e.vendor_err_synd = vendor; e.syndrome = synd;
            e.s_wqe_opcode_qpn = htobe32(qpn); e.wqe_counter = htobe16(ctr);
            e.op_own = MLX5_CQE_REQ_ERR << 4;
            hex(&e, sizeof e);
        }
        fflush(stdout);
    }
    return 0;
}
"#;

/// Where mlx5dv.h is, or why the test cannot run.
fn include_dir() -> Result<PathBuf, String> {
    let mut candidates = Vec::new();
    if let Some(d) = env::var_os("UVERBS_MLX5DV_INCLUDE") {
        candidates.push(PathBuf::from(d));
    }
    candidates.push(PathBuf::from("/usr/include"));
    let cache = env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    if let Some(c) = cache {
        candidates.push(c.join("uverbs-headers-ibverbs/usr/include"));
    }
    candidates
        .into_iter()
        .find(|d| d.join("infiniband/mlx5dv.h").is_file())
        .ok_or_else(|| {
            "no <infiniband/mlx5dv.h>: run scripts/test.sh (it fetches Debian's libibverbs-dev \
             into ~/.cache/uverbs-headers-ibverbs), or `apt-get download libibverbs-dev && \
             dpkg -x libibverbs-dev_*.deb DIR` and set UVERBS_MLX5DV_INCLUDE=DIR/usr/include"
                .to_string()
        })
}

/// Compiles the C program; `None` (with a note) where the header or a
/// compiler is missing outside CI. In CI both must be there.
fn build(tag: &str) -> Option<PathBuf> {
    let dir = match include_dir() {
        Ok(d) => d,
        Err(why) if env::var_os("CI").is_some() => panic!("{why}"),
        Err(why) => {
            eprintln!("mlx5dv golden tests not run: {why}");
            return None;
        }
    };
    let out = env::temp_dir().join(format!("uverbs-mlx5dv-golden-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&out).ok()?;
    let src = out.join("golden.c");
    std::fs::write(&src, PROGRAM).ok()?;
    let exe = out.join("golden");
    let mut cc = Command::new(env::var("CC").unwrap_or_else(|_| "cc".into()));
    cc.arg("-O1").arg("-mssse3").arg("-I").arg(&dir);
    // The kernel headers mlx5dv.h includes (<rdma/...>, <linux/types.h>).
    if let Some(k) = env::var_os("UVERBS_ABI_INCLUDE") {
        cc.arg("-I").arg(k);
    }
    let status = cc.arg("-o").arg(&exe).arg(&src).status();
    match status {
        Ok(s) if s.success() => Some(exe),
        Ok(s) => panic!("compiling the mlx5dv.h golden program failed ({s})"),
        Err(e) if env::var_os("CI").is_some() => panic!("no C compiler: {e}"),
        Err(e) => {
            eprintln!("mlx5dv golden tests not run: no C compiler ({e})");
            None
        }
    }
}

/// Runs the program on `input`; returns its lines.
fn run(exe: &PathBuf, input: &str) -> Vec<String> {
    let mut child = Command::new(exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the golden program");
    // Fed from a thread: the program answers line by line, so feeding all
    // of the input before reading would fill both pipes and deadlock.
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_owned();
    let feeder = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("golden program output");
    feeder
        .join()
        .expect("feeder thread")
        .expect("feed the golden program");
    let _ = std::fs::remove_dir_all(exe.parent().unwrap_or(exe));
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

/// xorshift64*: reproducible inputs.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn u32(&mut self) -> u32 {
        (self.next() >> 32) as u32
    }
    fn u8(&mut self) -> u8 {
        (self.next() >> 56) as u8
    }
    /// Edge values now and then.
    fn edgy32(&mut self) -> u32 {
        match self.next() % 8 {
            0 => 0,
            1 => u32::MAX,
            _ => self.u32(),
        }
    }
}

#[test]
fn encoders_match_the_mlx5dv_helpers_byte_for_byte() {
    let Some(exe) = build("wqe") else { return };
    let mut rng = Rng(0x5eed_0fc0_ffee);
    let mut input = String::new();
    let mut expected: Vec<Vec<u8>> = Vec::new();
    for i in 0..CASES {
        let pi = match i % 10 {
            0 => 0,
            1 => 0xffff,
            _ => rng.u32() as u16,
        };
        let (opcode, opmod, fm) = (rng.u8(), rng.u8(), rng.u8());
        let qpn = rng.u32() & 0x00ff_ffff;
        let ds = match i % 7 {
            0 => 0,
            1 => 63,
            _ => rng.u8() & 0x3f,
        };
        let imm = rng.edgy32();
        for variant in ["ctrl", "ctrl86"] {
            writeln!(
                input,
                "{variant} {pi} {opcode} {opmod} {qpn} {fm} {ds} {imm}"
            )
            .unwrap();
            // The header takes `imm` as a __be32 and stores it unchanged.
            expected.push(
                wqe::ctrl(pi, opcode, opmod, qpn, ds, fm, imm.to_ne_bytes())
                    .bytes()
                    .to_vec(),
            );
        }
        let (len, lkey, addr) = (rng.edgy32(), rng.edgy32(), rng.next());
        for variant in ["data", "data86"] {
            writeln!(input, "{variant} {len} {lkey} {addr}").unwrap();
            expected.push(wqe::data(len, lkey, addr).bytes().to_vec());
        }
        let (raddr, rkey) = (rng.next(), rng.edgy32());
        writeln!(input, "raddr {raddr} {rkey}").unwrap();
        expected.push(wqe::raddr(raddr, rkey).bytes().to_vec());
        let (sa, cmp) = (rng.next(), rng.next());
        writeln!(input, "atomic {sa} {cmp}").unwrap();
        expected.push(wqe::atomic(sa, cmp).bytes().to_vec());
        let ilen = rng.u32() & 0x7fff_ffff;
        writeln!(input, "inline {ilen}").unwrap();
        expected.push(wqe::inline_header(ilen).to_vec());
        let next = rng.u32() as u16;
        writeln!(input, "srqnext {next}").unwrap();
        expected.push(wqe::srq_next(next).bytes().to_vec());
        let mut av = Av {
            key: u64::from(rng.u32()) << 32,
            dqp_dct: rng.u32() & 0x00ff_ffff,
            ext: rng.next() % 2 == 0,
            stat_rate_sl: rng.u8(),
            fl_mlid: rng.u8(),
            rlid: rng.u32() as u16,
            tclass: rng.u8(),
            hop_limit: rng.u8(),
            grh_gid_fl: rng.u32(),
            ..Av::default()
        };
        for b in av.rmac.iter_mut().chain(av.rgid.iter_mut()) {
            *b = rng.u8();
        }
        let mut line = format!(
            "dgram {} {} {} {} {} {} {} {} {}",
            av.key,
            av.dqp_dct,
            u8::from(av.ext),
            av.stat_rate_sl,
            av.fl_mlid,
            av.rlid,
            av.tclass,
            av.hop_limit,
            av.grh_gid_fl
        );
        for b in av.rmac.iter().chain(av.rgid.iter()) {
            write!(line, " {b}").unwrap();
        }
        writeln!(input, "{line}").unwrap();
        expected.push(av.encode().to_vec());
    }
    let lines = run(&exe, &input);
    let (consts, sizes, got) = (&lines[0], &lines[1], &lines[2..]);
    check_constants(consts);
    assert_eq!(
        sizes, "S 16 16 16 16 48 16 64 64",
        "struct sizes (ctrl, data, raddr, atomic, av, srq next, cqe64, err cqe)"
    );
    assert_eq!(got.len(), expected.len());
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(
            unhex(g),
            *e,
            "input line {}: {}",
            i + 1,
            input.lines().nth(i).unwrap_or_default()
        );
    }
}

/// The header's constants equal ours.
fn check_constants(line: &str) {
    use super::wqe::opcode;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|t| t.parse().expect("number"))
        .collect();
    let ours: [u64; 26] = [
        opcode::SEND.into(),
        opcode::SEND_IMM.into(),
        opcode::RDMA_WRITE.into(),
        opcode::RDMA_WRITE_IMM.into(),
        opcode::RDMA_READ.into(),
        opcode::ATOMIC_CS.into(),
        opcode::ATOMIC_FA.into(),
        wqe::CTRL_FENCE.into(),
        wqe::CTRL_CQ_UPDATE.into(),
        wqe::CTRL_SOLICITED.into(),
        cqe::cqe_opcode::REQ.into(),
        cqe::cqe_opcode::RESP_WR_IMM.into(),
        cqe::cqe_opcode::RESP_SEND.into(),
        cqe::cqe_opcode::RESP_SEND_IMM.into(),
        cqe::cqe_opcode::RESP_SEND_INV.into(),
        cqe::cqe_opcode::REQ_ERR.into(),
        cqe::cqe_opcode::RESP_ERR.into(),
        cqe::cqe_opcode::INVALID.into(),
        cqe::syndrome::LOCAL_PROT_ERR.into(),
        cqe::syndrome::REMOTE_ACCESS_ERR.into(),
        cqe::syndrome::WR_FLUSH_ERR.into(),
        wqe::INLINE_SEG.into(),
        wqe::INVALID_LKEY.into(),
        wqe::EXTENDED_UD_AV.into(),
        wqe::SEND_WQE_BB as u64,
        cqe::syndrome::RNR_RETRY_EXC_ERR.into(),
    ];
    assert_eq!(
        v, ours,
        "constants of mlx5dv.h vs ours, in the program's order"
    );
}

#[test]
fn the_cqe_decoder_reads_what_mlx5dv_writes() {
    let Some(exe) = build("cqe") else { return };
    let mut rng = Rng(0xcafe_f00d_1234);
    let mut input = String::new();
    let mut fields = Vec::new();
    for _ in 0..CASES {
        let v = [
            u32::from(rng.u8()),
            rng.u32() & 0xffff,
            rng.edgy32(),
            rng.edgy32(),
            rng.edgy32(),
            rng.edgy32(),
            rng.edgy32(),
            rng.u32() & 0xffff,
            u32::from(rng.u8()),
            rng.edgy32(),
            rng.edgy32(),
        ];
        writeln!(
            input,
            "cqe {} {} {} {} {} {} {} {} {} {} {} 0",
            v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10]
        )
        .unwrap();
        fields.push(v);
        let (vendor, synd, qpn, ctr) = (rng.u8(), rng.u8(), rng.u32(), rng.u32() & 0xffff);
        writeln!(input, "errcqe {vendor} {synd} {qpn} {ctr}").unwrap();
        fields.push([
            u32::from(vendor),
            u32::from(synd),
            qpn,
            ctr,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ]);
    }
    let lines = run(&exe, &input);
    for (i, pair) in lines[2..].chunks(2).enumerate() {
        let v = fields[2 * i];
        let parts: Vec<&str> = pair[0].split_whitespace().collect();
        let bytes: [u8; 64] = unhex(parts[4]).try_into().expect("64 bytes");
        let c = Cqe64(bytes);
        let accessors: Vec<u32> = parts[..4].iter().map(|p| p.parse().unwrap()).collect();
        assert_eq!(
            [
                u32::from(c.owner()),
                u32::from(c.se()),
                u32::from(c.format()),
                u32::from(c.opcode())
            ],
            [accessors[0], accessors[1], accessors[2], accessors[3]],
            "case {i}: op_own {:#x}",
            v[8]
        );
        assert_eq!(u32::from(c.ml_path()), v[0] & 0x7f);
        assert_eq!(u32::from(c.slid()), v[1]);
        assert_eq!(c.src_qp(), v[2] & 0x00ff_ffff);
        assert_eq!(u32::from(c.sl()), (v[2] >> 24) & 0xf);
        assert_eq!(c.grh(), (v[2] >> 28) & 3 != 0);
        assert_eq!(c.srqn_uidx(), v[3] & 0x00ff_ffff);
        assert_eq!(c.imm_inval_pkey(), v[4]);
        assert_eq!(c.imm_raw(), v[4].to_be_bytes());
        assert_eq!(c.byte_cnt(), v[5]);
        assert_eq!(c.qpn(), v[6] & 0x00ff_ffff);
        assert_eq!(u32::from(c.wqe_opcode()), v[6] >> 24);
        assert_eq!(u32::from(c.wqe_counter()), v[7]);
        assert_eq!(c.op_own(), v[8] as u8);
        // The timestamp, as the whole CQE's accessor and as the poll's
        // fast paths read it (word 6, big-endian).
        let ts = u64::from(v[9]) << 32 | u64::from(v[10]);
        assert_eq!(c.timestamp(), ts);
        let w6 = u64::from_ne_bytes(bytes[48..56].try_into().unwrap());
        assert_eq!(u64::from_be(w6), ts);
        // The poll loop's requester view of the same bytes.
        let t = cqe::tail_of(&c);
        assert_eq!(t.op_own(), v[8] as u8);
        assert_eq!(t.opcode(), c.opcode());
        assert_eq!(t.srqn_uidx(), v[3] & 0x00ff_ffff);
        assert_eq!(t.byte_cnt(), v[5]);
        assert_eq!(t.qpn(), v[6] & 0x00ff_ffff);
        assert_eq!(u32::from(t.wqe_opcode()), v[6] >> 24);
        assert_eq!(u32::from(t.wqe_counter()), v[7]);
        assert_eq!(u32::from(t.ml_path()), v[0] & 0x7f);
        assert_eq!(u32::from(t.slid()), v[1]);
        assert_eq!(t.src_qp(), v[2] & 0x00ff_ffff);
        assert_eq!(u32::from(t.sl()), (v[2] >> 24) & 0xf);
        assert_eq!(t.grh(), (v[2] >> 28) & 3 != 0);
        assert_eq!(t.imm_inval_pkey(), v[4]);
        // The error CQE view of the same 64 bytes.
        let e = fields[2 * i + 1];
        let err = Cqe64(unhex(&pair[1]).try_into().expect("64 bytes"));
        assert_eq!(u32::from(err.vendor_err_synd()), e[0]);
        assert_eq!(u32::from(err.syndrome()), e[1]);
        assert_eq!(err.qpn(), e[2] & 0x00ff_ffff);
        assert_eq!(u32::from(err.wqe_counter()), e[3]);
        assert_eq!(err.opcode(), cqe::cqe_opcode::REQ_ERR);
    }
}
