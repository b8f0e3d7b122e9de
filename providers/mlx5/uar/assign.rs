//! Which bfreg a QP or a thread domain rings: with dynamic UARs, the NC
//! doorbell without write-combining, else a dedicated bfreg while fewer
//! than [`DEDICATED_BFREGS`] are in use, then one of [`SHARED_BFREGS`]
//! shared ones, round robin (rdma-core's `mlx5_get_qp_uar`), and a thread
//! domain's own; with static UARs, the one the kernel chose
//! (`map_uuar`, `need_uuar_lock`).

use std::sync::{Arc, MutexGuard};

use super::{
    alloc_dynamic, malformed, outside_page, Bfreg, Mode, Pool, Uars, ADAPTER_PAGE, BFREGS_PER_UAR,
    BF_OFFSET, DEDICATED_BFREGS, GROSS_PER_UAR, SHARED_BFREGS,
};
use crate::{error::Result, providers::Device};

impl Uars {
    pub(super) fn pool(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Chooses the bfreg of a new QP (dynamic UARs; `mlx5_get_qp_uar`):
    /// without write-combining, the NC doorbell; else a dedicated bfreg
    /// while fewer than [`DEDICATED_BFREGS`] are in use, then one of
    /// [`SHARED_BFREGS`] shared ones, round robin. Static UARs: `None`, the
    /// kernel chooses (see [`Uars::static_bfreg`]).
    pub(crate) fn qp_bfreg(&self, dev: Device<'_>) -> Result<Option<Arc<Bfreg>>> {
        if self.is_static() {
            return Ok(None);
        }
        if self.bf_reg_size == 0 {
            return Ok(Some(self.nc_bfreg.clone()));
        }
        let mut pool = self.pool();
        if let Some(b) = pool.free_dedicated.pop() {
            pool.dedicated_used += 1;
            return Ok(Some(b));
        }
        if pool.dedicated_used < DEDICATED_BFREGS {
            let bfregs = self.alloc_bf_page(dev, false)?;
            pool.dedicated_used += 1;
            let mut it = bfregs.into_iter();
            let first = it.next();
            pool.free_dedicated.extend(it);
            return Ok(first);
        }
        let idx = pool.next_shared % SHARED_BFREGS;
        pool.next_shared = pool.next_shared.wrapping_add(1);
        while pool.shared.len() <= idx {
            let bfregs = self.alloc_bf_page(dev, true)?;
            pool.shared.extend(bfregs);
        }
        Ok(Some(pool.shared[idx].clone()))
    }

    /// A thread domain's own bfreg (`mlx5_attach_dedicated_uar`): a free
    /// one of the pages thread domains took, or the first of a new BF page
    /// (kept apart from the QPs' dedicated and shared ones), rung without
    /// a lock. Without write-combining, the NC doorbell (doorbells only,
    /// which need no lock either). Static UARs: `None`, the kernel chooses
    /// the QPs' bfregs as without a thread domain (libmlx5 would map a
    /// page of the context's "dynamic" static bfregs, which it asks for
    /// only when the program sets `MLX5_NUM_DYN_BFREGS`-like attributes
    /// this crate does not have).
    pub(crate) fn td_bfreg(&self, dev: Device<'_>) -> Result<Option<Arc<Bfreg>>> {
        if self.is_static() {
            return Ok(None);
        }
        if self.bf_reg_size == 0 {
            return Ok(Some(self.nc_bfreg.clone()));
        }
        let mut pool = self.pool();
        if let Some(b) = pool.free_td.pop() {
            return Ok(Some(b));
        }
        let mut bfregs = self.alloc_bf_page(dev, false)?.into_iter();
        let first = bfregs.next();
        // Handed out from the end: the page's next bfreg first.
        pool.free_td.extend(bfregs.rev());
        Ok(first)
    }

    /// Gives a thread domain's bfreg back when the thread domain goes.
    pub(crate) fn release_td(&self, bfreg: &Arc<Bfreg>) {
        if bfreg.buf_size == 0 || self.is_static() {
            return;
        }
        self.pool().free_td.push(bfreg.clone());
    }

    /// Gives a QP's dedicated bfreg back when the QP is destroyed.
    pub(crate) fn release(&self, bfreg: &Arc<Bfreg>) {
        if bfreg.is_shared() || bfreg.buf_size == 0 || self.is_static() {
            return;
        }
        let mut pool = self.pool();
        pool.dedicated_used = pool.dedicated_used.saturating_sub(1);
        pool.free_dedicated.push(bfreg.clone());
    }

    /// A new BF page's bfregs (2 per sub-UAR). Sub-UAR `j` is page id
    /// `page_id + j`: a page id the kernel gave so close to `u32::MAX` that
    /// its sub-UARs' ids do not fit is `Malformed`.
    fn alloc_bf_page(&self, dev: Device<'_>, shared: bool) -> Result<Vec<Arc<Bfreg>>> {
        let page = Arc::new(alloc_dynamic(dev, false)?.0);
        let subs = (page.len() / ADAPTER_PAGE).min(self.uars_per_page);
        let mut out = Vec::with_capacity(subs * 2);
        let half = self.bf_reg_size / 2;
        for j in 0..subs {
            let id = u32::try_from(j)
                .ok()
                .and_then(|j| page.page_id.checked_add(j))
                .ok_or_else(|| {
                    malformed(format!(
                        "the kernel gave a UAR page id {:#x} with {subs} 4 KiB UARs: \
                         UAR {j}'s id is past u32::MAX",
                        page.page_id
                    ))
                })?;
            for k in 0..BFREGS_PER_UAR as usize {
                let reg = bf_reg_offset(j, k, self.bf_reg_size).ok_or_else(|| {
                    malformed(format!(
                        "the context's BlueFlame register size {} puts bfreg {k} of \
                         UAR {j} past the address space",
                        self.bf_reg_size
                    ))
                })?;
                let bf = Bfreg::new(page.clone(), reg, half, shared, id)
                    .ok_or_else(|| outside_page(reg, half, page.len()))?;
                out.push(Arc::new(bf));
            }
        }
        Ok(out)
    }

    /// The static bfreg the kernel chose for a QP (its gross index), as
    /// rdma-core's `map_uuar` finds it; `None` for an index outside the
    /// mapped pages or not a usable bfreg.
    pub(crate) fn static_bfreg(
        &self,
        gross: u32,
        low_latency: u32,
        total: u32,
    ) -> Option<Arc<Bfreg>> {
        let Mode::Static { pages, bfregs } = &self.mode else {
            return None;
        };
        let mut made = bfregs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = made.get(&gross) {
            return Some(b.clone());
        }
        let uar = (gross / GROSS_PER_UAR) as usize;
        let k = (gross % GROSS_PER_UAR) as usize;
        if k >= BFREGS_PER_UAR as usize {
            return None;
        }
        let page = pages.get(uar / self.uars_per_page)?.clone();
        let reg = bf_reg_offset(uar % self.uars_per_page, k, self.bf_reg_size)?;
        let buf_size = if gross == 0 { 0 } else { self.bf_reg_size / 2 };
        let b = Arc::new(Bfreg::new(
            page,
            reg,
            buf_size,
            needs_lock(gross, low_latency, total),
            gross,
        )?);
        made.insert(gross, b.clone());
        Some(b)
    }
}

/// The offset in its page of bfreg `k` of sub-UAR `sub`
/// (`sub * 4096 + 0x800 + k * bf_reg_size`), `None` when it overflows
/// (`bf_reg_size` is the kernel's).
fn bf_reg_offset(sub: usize, k: usize, bf_reg_size: usize) -> Option<usize> {
    sub.checked_mul(ADAPTER_PAGE)?
        .checked_add(BF_OFFSET)?
        .checked_add(k.checked_mul(bf_reg_size)?)
}

/// rdma-core's `need_uuar_lock`: bfreg 0 needs none (8-byte doorbells
/// only), the low-latency ones are dedicated, the rest are shared.
fn needs_lock(gross: u32, low_latency: u32, total: u32) -> bool {
    if gross == 0 {
        return false;
    }
    let i = gross / 2 + gross % 2;
    i < total.saturating_sub(low_latency)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_lock_rule_matches_rdma_core() {
        // tot 16, low latency 4: gross indexes whose (i/2 + i%2) >= 12 are
        // dedicated.
        assert!(!needs_lock(0, 4, 16));
        assert!(needs_lock(1, 4, 16));
        assert!(needs_lock(4, 4, 16));
        assert!(!needs_lock(24, 4, 16));
        assert!(!needs_lock(29, 4, 16));
        assert!(needs_lock(21, 4, 16));
    }
}
