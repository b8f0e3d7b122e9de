//! Queue memory from the program's own allocator: what a parent domain's
//! `alloc` and `free` callbacks are in libibverbs
//! (`ibv_parent_domain_init_attr`, `IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS`).
//!
//! A provider that allocates queue memory itself (mlx5: the WQE buffers of
//! QPs and SRQs, CQE buffers, doorbell records) asks the [`QueueAllocator`]
//! of the parent domain an object is created in for that memory, exactly
//! where rdma-core's provider calls `pd->alloc` (libmlx5: `mlx5_alloc_buf`,
//! `mlx5_alloc_prefered_buf`, `mlx5_alloc_dbrec`), with the size, the
//! alignment and what the memory is for ([`QueueResource`]). The allocator
//! may answer [`QueueMemory::UseDefault`]: the provider then allocates that
//! piece as it does without a parent domain. Memory the allocator gave is
//! not the provider's: it goes back through [`QueueAllocator::free`], with
//! the same request, after the kernel object that used it is destroyed.
//!
//! The provider zeroes what it is given before the device sees it (the
//! allocator's memory may hold anything). rxe allocates no queue memory
//! (the kernel does) and has no parent domains at all, as rdma-core's rxe.
// The trait is `unsafe`: providers hand the memory it answers to the
// device, so its implementor vouches for it (see `QueueAllocator`).
#![allow(unsafe_code)]

use std::{fmt, ptr::NonNull};

use crate::sys::Errno;

/// What a piece of queue memory is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QueueResource {
    /// A QP's WQE buffer (receive queue, then send queue).
    Qp,
    /// A receive work queue's buffer (`ibv_create_wq`; no provider of
    /// this crate makes one yet).
    Rwq,
    /// A doorbell record (8 bytes the device reads the queue's counters
    /// from).
    DoorbellRecord,
    /// An SRQ's WQE buffer.
    Srq,
    /// A CQ's CQE buffer.
    Cq,
}

/// One request to a [`QueueAllocator`]: the same value is passed to
/// [`QueueAllocator::free`] with the memory it was answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueAllocRequest {
    /// Bytes wanted (never 0).
    pub size: usize,
    /// The alignment the memory must have (a power of two).
    pub alignment: usize,
    /// What the memory is for.
    pub resource: QueueResource,
    /// The provider's number for `resource`: what rdma-core's provider
    /// passes as the callbacks' `resource_type` (mlx5: `mlx5dv.h`'s
    /// `MLX5DV_RES_TYPE_QP` .. `MLX5DV_RES_TYPE_CQ`).
    pub resource_type: u64,
}

impl QueueAllocRequest {
    /// A request of `size` bytes aligned to `alignment` for `resource`,
    /// which the provider numbers `resource_type` (tests and allocators
    /// that forward requests).
    pub fn new(size: usize, alignment: usize, resource: QueueResource, resource_type: u64) -> Self {
        QueueAllocRequest {
            size,
            alignment,
            resource,
            resource_type,
        }
    }
}

/// A [`QueueAllocator`]'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueMemory {
    /// This memory: at least `size` bytes at the requested alignment.
    Memory(NonNull<u8>),
    /// Allocate it as without an allocator (`IBV_ALLOCATOR_USE_DEFAULT`).
    UseDefault,
}

/// The program's allocator of queue memory, given to a parent domain
/// ([`crate::ParentDomainAttr::allocator`]).
///
/// # Safety
///
/// Memory answered by [`QueueAllocator::alloc`] is readable and writable
/// for `size` bytes from the returned address, aligned to `alignment`,
/// used by nothing else (not by the program, not by another answer) and
/// stays so until [`QueueAllocator::free`] is called for it: the device
/// and the provider read and write it through raw pointers meanwhile.
pub unsafe trait QueueAllocator: Send + Sync + fmt::Debug {
    /// Memory for `req`, [`QueueMemory::UseDefault`], or an error, which
    /// fails the object's creation with that errno.
    fn alloc(&self, req: &QueueAllocRequest) -> Result<QueueMemory, Errno>;

    /// Takes back memory [`QueueAllocator::alloc`] answered `req` with.
    ///
    /// # Safety
    ///
    /// `ptr` is what `alloc(req)` returned, and neither the device nor the
    /// provider uses it any more; it is freed once.
    unsafe fn free(&self, ptr: NonNull<u8>, req: &QueueAllocRequest);
}
