//! Address handles for UD (`ibv_create_ah`, `ibv_destroy_ah`).

use std::sync::Arc;

use zerocopy::{FromZeros, IntoBytes};

use crate::{
    abi,
    context::Verb,
    error::{DestroyError, Error, Result},
    object::{self, Destroy, Owned},
    pd::{PdInner, ProtectionDomain},
    providers::AnyAh,
    qp_attr::AhAttr,
    sys::Errno,
};

/// An address handle's kernel object.
#[derive(Debug)]
pub(crate) struct AhInner {
    pub(crate) pd: Arc<Owned<PdInner>>,
    pub(crate) handle: u32,
    /// The provider's driver data (rxe: the AH pool index UD WQEs carry).
    pub(crate) driver: AnyAh,
}

impl Destroy for AhInner {
    fn destroy_kernel(&self) -> Result<()> {
        self.pd
            .ctx
            .destroy_simple(
                Verb::DestroyAh,
                (
                    abi::UVERBS_OBJECT_AH,
                    abi::UVERBS_METHOD_AH_DESTROY,
                    abi::UVERBS_ATTR_DESTROY_AH_HANDLE,
                ),
                abi::IB_USER_VERBS_CMD_DESTROY_AH,
                self.handle,
            )
            .map_err(|e| Error::sys("UVERBS_METHOD_AH_DESTROY", e))
    }
}

impl ProtectionDomain {
    /// Creates an address handle, like `ibv_create_ah` (the `CREATE_AH`
    /// write command). RoCE needs a GRH: `attr.grh` with the destination GID
    /// and the local GID index.
    #[doc(alias = "ibv_create_ah")]
    pub fn create_ah(&self, attr: &AhAttr) -> Result<AddressHandle> {
        let ctx = &self.inner.ctx;
        let mut req = abi::IbUverbsCreateAh::new_zeroed();
        req.user_handle = ctx.events.unregistered_handle();
        req.pd_handle = self.inner.handle;
        req.attr = attr.to_abi();
        let mut resp = abi::IbUverbsCreateAhResp::new_zeroed();
        let driver = ctx.provider.create_ah(attr, &mut |driver_out| {
            ctx.write_with_resp(
                abi::IB_USER_VERBS_CMD_CREATE_AH,
                req.as_bytes(),
                &[],
                resp.as_mut_bytes(),
                driver_out,
            )
        });
        let driver = driver.map_err(|e| {
            let err = Error::sys("IB_USER_VERBS_CMD_CREATE_AH", e);
            match e {
                Errno::EINVAL if attr.grh.is_none() => {
                    err.with_detail("RoCE address handles need a GRH (dgid and sgid_index)")
                }
                Errno::EINVAL | Errno::ENOENT | Errno::ENODATA => {
                    err.with_detail("the port, source GID index or destination GID is not usable")
                }
                _ => err,
            }
        })?;
        Ok(AddressHandle {
            inner: Owned::new(AhInner {
                pd: self.inner.clone(),
                handle: resp.ah_handle,
                driver,
            }),
        })
    }
}

/// An address handle (`struct ibv_ah`): where UD sends go.
#[derive(Debug, Clone)]
pub struct AddressHandle {
    pub(crate) inner: Arc<Owned<AhInner>>,
}

impl AddressHandle {
    /// The kernel's handle.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// The provider's data for this AH (what UD send WQEs carry).
    pub(crate) fn driver(&self) -> &AnyAh {
        &self.inner.driver
    }

    /// Destroys the AH now, like `ibv_destroy_ah`, giving it back on any
    /// failure: `EBUSY` while clones exist, or the kernel's refusal, after
    /// which it is as it was (UD sends may still use it): destroy it again,
    /// or drop it (the last drop tries once more).
    #[doc(alias = "ibv_destroy_ah")]
    pub fn destroy(self) -> Result<(), DestroyError<Self>> {
        object::try_destroy(self.inner, "ibv_destroy_ah")
            .map_err(|(inner, e)| DestroyError::new(AddressHandle { inner }, e))
    }
}
