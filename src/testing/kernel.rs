//! A scriptable fake kernel for tests.
//!
//! [`FakeKernel`] implements [`Kernel`] without touching the system: sysfs
//! files come from a map, netlink, ioctl and write commands go to handler
//! closures that see the structured requests ([`IoctlCmd`], [`WriteCmd`]),
//! and every call is logged. It lets host tests drive the real code paths
//! (discovery, context creation, the ioctl-to-write fallback, error
//! reporting) and play kernels that behave in ways a test machine's kernel
//! does not (no ioctl support, a removed device, a different driver).

use std::{
    collections::{HashMap, VecDeque},
    ffi::OsString,
    fmt,
    fs::File,
    io::{Read, Write},
    os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd},
    path::{Path, PathBuf},
    sync::{Arc, Condvar, Mutex},
    time::Duration,
};

use crate::sys::{
    AttrBuf, Errno, IoctlCmd, Kernel, Mapping, Protection, Readiness, UcmaCmd, WriteCmd,
};

/// A call the fake kernel received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `open` of a device node.
    Open(PathBuf),
    /// An ioctl: object and method id.
    Ioctl {
        /// `UVERBS_OBJECT_*`.
        object: u16,
        /// `UVERBS_METHOD_*`.
        method: u16,
    },
    /// A write command.
    Write(u32),
    /// A raw write of this many bytes.
    RawWrite(usize),
    /// A netlink request of this message type.
    Netlink(u16),
    /// An mmap of this length at this offset.
    Mmap(usize, u64),
}

/// A handler, shared so that commands from several threads each reach it:
/// they take turns on its own lock (the fake's state lock is not held while
/// it runs, so it may use the fake).
type Handler<F> = Arc<Mutex<Box<F>>>;
type IoctlFn = dyn FnMut(&mut IoctlCmd<'_>) -> Result<(), Errno> + Send;
type WriteFn = dyn FnMut(&mut WriteCmd<'_>) -> Result<(), Errno> + Send;
type NetlinkFn = dyn FnMut(&[u8]) -> Result<Vec<Vec<u8>>, Errno> + Send;
type RawWriteFn = dyn FnMut(&[u8]) -> Result<usize, Errno> + Send;
type UcmaFn = dyn FnMut(&[u8], &mut [u8]) -> Result<(), Errno> + Send;
type MmapFn = dyn FnMut(u64, usize) -> Result<Mapping, Errno> + Send;
type WaitFn = Box<dyn Fn(Option<Duration>) -> Result<Readiness, Errno> + Send + Sync>;
type ReadFn = dyn FnMut(&mut [u8], bool) -> Result<usize, Errno> + Send;
type RecordReadFn = dyn Fn(RawFd, &[u8]) + Send + Sync;

fn handler<F: ?Sized>(f: Box<F>) -> Option<Handler<F>> {
    Some(Arc::new(Mutex::new(f)))
}

/// Runs a handler on its own lock.
fn call<F: ?Sized, R>(h: &Handler<F>, f: impl FnOnce(&mut F) -> R) -> R {
    let mut guard = h.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut **guard)
}

#[derive(Default)]
struct State {
    files: HashMap<PathBuf, String>,
    char_dev: Option<u64>,
    open_error: Option<Errno>,
    ioctl: Option<Handler<IoctlFn>>,
    write: Option<Handler<WriteFn>>,
    raw_write: Option<Handler<RawWriteFn>>,
    ucma: Option<Handler<UcmaFn>>,
    netlink: Option<Handler<NetlinkFn>>,
    mmap: Option<Handler<MmapFn>>,
    wait: Option<Arc<WaitFn>>,
    /// Records any fd reads.
    reads: VecDeque<Result<Vec<u8>, Errno>>,
    /// Records only one fd reads (before those of `reads`).
    reads_for: HashMap<RawFd, VecDeque<Result<Vec<u8>, Errno>>>,
    /// Fds whose reads a handler answers (a device's own fd kinds), with
    /// the file they were when the handler was set.
    fd_readers: HashMap<RawFd, (FileId, Handler<ReadFn>)>,
    /// Event fds made by [`FakeKernel::event_fd`]: the pipe's write end and
    /// a second handle on its read end, keyed by the read end handed out.
    /// A byte stands in the pipe for every record queued for the fd, so
    /// `poll` and `epoll` of the fd itself see what a read would find.
    readiness: HashMap<RawFd, (File, File)>,
    /// Told of every queued record a read takes, under the state lock.
    record_read: Option<Arc<RecordReadFn>>,
    /// Told of every queued record a read took, after the lock (may block).
    after_read: Option<Arc<RecordReadFn>>,
    calls: Vec<Call>,
    ioctls: Vec<IoctlShape>,
}

/// An ioctl as the kernel's attribute parser sees it ([`FakeKernel::ioctls`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoctlShape {
    /// `UVERBS_OBJECT_*` or a driver object.
    pub object: u16,
    /// The method.
    pub method: u16,
    /// The `RDMA_DRIVER_*` id in the header.
    pub driver_id: u32,
    /// Each attribute: `(id, kind, len, flags)`.
    pub attrs: Vec<(u16, AttrKind, u16, u16)>,
}

/// How an attribute is passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttrKind {
    /// In `data` itself: an inline input (`len` > 0), or an object handle
    /// (`len` 0).
    Inline,
    /// An input buffer by pointer.
    In,
    /// An output buffer by pointer.
    Out,
    /// An existing fd.
    Fd,
    /// A new fd the kernel creates.
    NewFd,
    /// A new object the kernel creates.
    NewObject,
}

/// The fake; see the module documentation.
#[derive(Default)]
pub struct FakeKernel {
    state: Mutex<State>,
    /// Signalled when a record is queued (waits sleep on it).
    queued: Condvar,
}

impl fmt::Debug for FakeKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeKernel").finish_non_exhaustive()
    }
}

impl FakeKernel {
    /// A kernel with no devices and no handlers (every command fails with `ENOTTY`/`EOPNOTSUPP`).
    pub fn new() -> Self {
        Self::default()
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut guard = match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }

    /// Adds a (sysfs) file.
    pub fn file(&self, path: impl Into<PathBuf>, contents: impl Into<String>) -> &Self {
        self.with(|s| s.files.insert(path.into(), contents.into()));
        self
    }

    /// The device number `char_dev` reports for opened nodes.
    pub fn char_dev(&self, dev: u64) -> &Self {
        self.with(|s| s.char_dev = Some(dev));
        self
    }

    /// Makes `open` fail.
    pub fn fail_open(&self, errno: Errno) -> &Self {
        self.with(|s| s.open_error = Some(errno));
        self
    }

    /// Handles ioctls.
    pub fn on_ioctl(
        &self,
        f: impl FnMut(&mut IoctlCmd<'_>) -> Result<(), Errno> + Send + 'static,
    ) -> &Self {
        self.with(|s| s.ioctl = handler(Box::new(f)));
        self
    }

    /// Handles write commands.
    pub fn on_write(
        &self,
        f: impl FnMut(&mut WriteCmd<'_>) -> Result<(), Errno> + Send + 'static,
    ) -> &Self {
        self.with(|s| s.write = handler(Box::new(f)));
        self
    }

    /// Handles raw writes (the rdma_cm device).
    pub fn on_raw_write(
        &self,
        f: impl FnMut(&[u8]) -> Result<usize, Errno> + Send + 'static,
    ) -> &Self {
        self.with(|s| s.raw_write = handler(Box::new(f)));
        self
    }

    /// Handles rdma_cm commands: the handler gets the bytes written (header
    /// and body, the body's `response` field holding the response buffer's
    /// address) and the response buffer to fill. Without it, rdma_cm commands
    /// go to the raw write handler.
    pub fn on_ucma(
        &self,
        f: impl FnMut(&[u8], &mut [u8]) -> Result<(), Errno> + Send + 'static,
    ) -> &Self {
        self.with(|s| s.ucma = handler(Box::new(f)));
        self
    }

    /// Handles netlink requests: returns the reply messages.
    pub fn on_netlink(
        &self,
        f: impl FnMut(&[u8]) -> Result<Vec<Vec<u8>>, Errno> + Send + 'static,
    ) -> &Self {
        self.with(|s| s.netlink = handler(Box::new(f)));
        self
    }

    /// Makes the mappings: the handler gets the mmap offset and length and
    /// returns the memory (e.g. a driver's queue, with the header its mmap
    /// provides). Without it, mappings are zeroed anonymous memory. A
    /// mapping shorter than asked for is refused with `EINVAL`.
    ///
    /// # Safety
    ///
    /// The providers store into what `mmap` returns, so every mapping the
    /// handler returns must keep [`Kernel`]'s contract: readable and
    /// writable (the fake has no read-only mappings to make), mapped until
    /// the `Mapping` is dropped (no truncated file behind it, no
    /// `mprotect`), and never accessed through Rust references.
    #[allow(unsafe_code)] // the handler's mappings are what `unsafe impl Kernel` promises
    pub unsafe fn on_mmap(
        &self,
        f: impl FnMut(u64, usize) -> Result<Mapping, Errno> + Send + 'static,
    ) -> &Self {
        self.with(|s| s.mmap = handler(Box::new(f)));
        self
    }

    /// Answers `wait_readable` (called without the fake's lock held, so it
    /// may sleep). Without it, the fd is readable while reads are queued
    /// for it (the wait sleeps until one is, or the timeout passes).
    pub fn on_wait_readable(
        &self,
        f: impl Fn(Option<Duration>) -> Result<Readiness, Errno> + Send + Sync + 'static,
    ) -> &Self {
        self.with(|s| s.wait = Some(Arc::new(Box::new(f))));
        self
    }

    /// Calls `f` with the fd and the bytes of every queued record a `read`
    /// takes, atomically with taking it (the kernel counts an event as
    /// reported when it is read). `f` runs under the fake's lock: it must
    /// not call the fake.
    pub fn on_record_read(&self, f: impl Fn(RawFd, &[u8]) + Send + Sync + 'static) -> &Self {
        self.with(|s| s.record_read = Some(Arc::new(f)));
        self
    }

    /// Calls `f` with the fd and the bytes of every queued record a `read`
    /// took, before the read returns, without the fake's lock: a test can
    /// hold a reader there, between its read and its use of the record.
    pub fn on_after_read(&self, f: impl Fn(RawFd, &[u8]) + Send + Sync + 'static) -> &Self {
        self.with(|s| s.after_read = Some(Arc::new(f)));
        self
    }

    /// Queues the result of the next `read` (on any fd).
    pub fn push_read(&self, result: Result<Vec<u8>, Errno>) -> &Self {
        self.with(|s| s.reads.push_back(result));
        self.queued.notify_all();
        self
    }

    /// Answers reads of `fd` with `f`, which gets the buffer and whether
    /// the fd is `O_NONBLOCK` (it may block, as the kernel does, when it is
    /// not). Waits on `fd` poll the real fd, so `f`'s owner keeps its
    /// readiness (e.g. the read end of a pipe it writes a byte to per
    /// record and closes when the queue is destroyed); `forget_fd` ends it.
    pub fn on_read_fd(
        &self,
        fd: RawFd,
        f: impl FnMut(&mut [u8], bool) -> Result<usize, Errno> + Send + 'static,
    ) -> &Self {
        if let Some(id) = file_id(fd) {
            self.with(|s| {
                s.fd_readers
                    .insert(fd, (id, Arc::new(Mutex::new(Box::new(f)))))
            });
        }
        self
    }

    /// The handler of `fd`, if it still is the file the handler was set
    /// for (the fake is not told when an fd is closed and its number
    /// reused: a stale handler is dropped here).
    fn reader_of(&self, fd: RawFd) -> Option<Handler<ReadFn>> {
        let (id, h) = self.with(|s| s.fd_readers.get(&fd).cloned())?;
        if file_id(fd) == Some(id) {
            Some(h)
        } else {
            self.forget_fd(fd);
            None
        }
    }

    /// Forgets what was set up for `fd` (its handler and queued records).
    pub fn forget_fd(&self, fd: RawFd) {
        self.with(|s| {
            s.fd_readers.remove(&fd);
            s.reads_for.remove(&fd);
            s.readiness.remove(&fd);
        });
    }

    /// A new event fd with real readiness: the read end of a pipe that
    /// holds a byte for every record queued for it with
    /// [`FakeKernel::push_read_to`] (and taken back when a read takes the
    /// record or [`FakeKernel::discard_reads`] drops it), so `poll`,
    /// `epoll` and `O_NONBLOCK` readers of the fd itself see what the
    /// kernel's event files would show. Reads still go through
    /// [`Kernel::read`]; [`FakeKernel::forget_fd`] ends it.
    pub fn event_fd(&self) -> Result<OwnedFd, Errno> {
        use nix::fcntl::{fcntl, FcntlArg, OFlag};
        use std::os::unix::fs::OpenOptionsExt;
        // The program's end is blocking, as the kernel makes event fds; the
        // fake's own ends never block: the write end, and a second open
        // file of the read end (its own O_NONBLOCK, unlike a dup's).
        let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        fcntl(w.as_raw_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
        let second = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(format!("/proc/self/fd/{}", r.as_raw_fd()))
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
        let raw = r.as_raw_fd();
        self.with(|s| {
            // A number reused after a close the fake was not told of.
            s.reads_for.remove(&raw);
            s.readiness.insert(raw, (File::from(w), second));
        });
        Ok(r)
    }

    /// Whether `fd` is `O_NONBLOCK` (the flag of the real file the fake
    /// handed out, set by [`Kernel::set_nonblocking`] or by the program).
    pub fn is_nonblocking(&self, fd: RawFd) -> bool {
        nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL).is_ok_and(|f| {
            nix::fcntl::OFlag::from_bits_retain(f).contains(nix::fcntl::OFlag::O_NONBLOCK)
        })
    }

    /// Queues the result of a `read` of fd `fd` only (a record of one
    /// completion channel when a process has several); reads of `fd` take
    /// these first.
    pub fn push_read_to(&self, fd: RawFd, result: Result<Vec<u8>, Errno>) -> &Self {
        self.with(|s| {
            s.reads_for.entry(fd).or_default().push_back(result);
            signal(s, fd);
        });
        self.queued.notify_all();
        self
    }

    /// Removes the records queued for reads of `fd` (`None`: of any fd)
    /// that `matches` accepts, as the kernel drops the unread events of an
    /// object it destroys; returns how many it removed.
    pub fn discard_reads(&self, fd: Option<RawFd>, matches: impl Fn(&[u8]) -> bool) -> usize {
        self.with(|s| {
            let queue = match fd {
                Some(fd) => s.reads_for.entry(fd).or_default(),
                None => &mut s.reads,
            };
            let before = queue.len();
            queue.retain(|r| !r.as_ref().is_ok_and(|bytes| matches(bytes)));
            let n = before - queue.len();
            if let Some(fd) = fd {
                drain(s, fd, n);
            }
            n
        })
    }

    /// The calls received so far.
    pub fn calls(&self) -> Vec<Call> {
        self.with(|s| s.calls.clone())
    }

    /// Forgets the calls received so far.
    pub fn clear_calls(&self) {
        self.with(|s| {
            s.calls.clear();
            s.ioctls.clear();
        });
    }

    fn log(&self, call: Call) {
        self.with(|s| s.calls.push(call));
    }

    /// Every ioctl received so far, with its attributes.
    pub fn ioctls(&self) -> Vec<IoctlShape> {
        self.with(|s| s.ioctls.clone())
    }

    /// Takes the next queued record for `raw` into `buf` (under the lock).
    /// A record longer than the buffer is refused and stays queued.
    fn take_record(s: &mut State, raw: RawFd, buf: &mut [u8]) -> Result<usize, Errno> {
        let observer = s.record_read.clone();
        let own = s.reads_for.get(&raw).is_some_and(|q| !q.is_empty());
        if own
            && s.reads_for
                .get(&raw)
                .and_then(|q| q.front())
                .is_some_and(|r| match r {
                    Ok(bytes) => bytes.len() <= buf.len(),
                    Err(_) => true,
                })
        {
            drain(s, raw, 1);
        }
        let queue = match s.reads_for.get_mut(&raw).filter(|q| !q.is_empty()) {
            Some(q) => q,
            None => &mut s.reads,
        };
        match queue.front() {
            None => Err(Errno::EAGAIN),
            Some(Ok(bytes)) if bytes.len() > buf.len() => Err(Errno::EINVAL),
            Some(_) => match queue.pop_front() {
                Some(Ok(bytes)) => {
                    buf[..bytes.len()].copy_from_slice(&bytes);
                    if let Some(f) = observer {
                        f(raw, &bytes);
                    }
                    Ok(bytes.len())
                }
                Some(Err(e)) => Err(e),
                None => Err(Errno::EAGAIN),
            },
        }
    }

    /// The default `wait_readable`: readable while records are queued.
    fn wait_queued(
        &self,
        fd: BorrowedFd<'_>,
        raw: RawFd,
        timeout: Option<Duration>,
    ) -> Result<Readiness, Errno> {
        if self.reader_of(raw).is_some() {
            return crate::sys::Linux.wait_readable(fd, timeout);
        }
        let deadline = timeout.and_then(|t| std::time::Instant::now().checked_add(t));
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let s = &*guard;
            if !s.reads.is_empty() || s.reads_for.get(&raw).is_some_and(|q| !q.is_empty()) {
                return Ok(Readiness::Readable);
            }
            guard = match deadline {
                None if timeout.is_some() => return Ok(Readiness::Readable),
                None => self.queued.wait(guard).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let now = std::time::Instant::now();
                    if now >= d {
                        return Ok(Readiness::TimedOut);
                    }
                    self.queued
                        .wait_timeout(guard, d - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
    }

    /// [`Kernel::read`] as if `fd` were non-blocking: a record if one is
    /// queued, `EAGAIN` otherwise, never a wait (for a caller that does its
    /// own waiting on the fd, such as the LD_PRELOAD shim's reads, which a
    /// signal must be able to interrupt).
    pub fn try_read(&self, fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize, Errno> {
        self.read_as(fd, buf, true)
    }

    fn read_as(
        &self,
        fd: BorrowedFd<'_>,
        buf: &mut [u8],
        nonblocking: bool,
    ) -> Result<usize, Errno> {
        let raw = fd.as_raw_fd();
        let reader = self.reader_of(raw);
        if let Some(h) = reader {
            return call(&h, |f: &mut ReadFn| f(buf, nonblocking));
        }
        // A record longer than the buffer is refused and stays queued, as
        // the uverbs event files do (`ib_uverbs_event_read`: EINVAL). An
        // empty queue answers EAGAIN when the fd is non-blocking, and is
        // waited on otherwise, as the kernel's read waits.
        let (result, after) = loop {
            let (result, after) = self.with(|s| {
                let after = s.after_read.clone();
                (Self::take_record(s, raw, buf), after)
            });
            if result != Err(Errno::EAGAIN) || nonblocking {
                break (result, after);
            }
            self.wait_queued(fd, raw, None)?;
        };
        if let (Ok(n), Some(f)) = (&result, after) {
            f(raw, &buf[..*n]);
        }
        result
    }
}

/// One readiness byte in the pipe of `fd`, if it has one.
fn signal(s: &State, fd: RawFd) {
    if let Some((w, _)) = s.readiness.get(&fd) {
        let _ = (&*w).write(&[1]);
    }
}

/// Takes `n` readiness bytes back from the pipe of `fd`, if it has one.
fn drain(s: &State, fd: RawFd, n: usize) {
    if let Some((_, r)) = s.readiness.get(&fd) {
        let mut buf = [0u8; 64];
        let mut left = n;
        while left > 0 {
            match (&*r).read(&mut buf[..left.min(64)]) {
                Ok(0) | Err(_) => break,
                Ok(k) => left -= k,
            }
        }
    }
}

/// Which file an fd refers to (device and inode).
type FileId = (u64, u64);

// `dev_t` and `ino_t` are u64 here but not on every target.
#[allow(clippy::unnecessary_cast)]
fn file_id(fd: RawFd) -> Option<FileId> {
    nix::sys::stat::fstat(fd)
        .ok()
        .map(|st| (st.st_dev as u64, st.st_ino as u64))
}

/// A real, harmless file descriptor for fake objects (`/dev/null`).
pub fn dummy_fd() -> OwnedFd {
    match File::open("/dev/null") {
        Ok(f) => f.into(),
        Err(e) => panic!("opening /dev/null for a fake fd: {e}"),
    }
}

#[allow(unsafe_code)] // implements the `unsafe` trait `Kernel`
                      // SAFETY: `mmap` returns either a fresh anonymous read-write mapping of
                      // `len` bytes or what the `on_mmap` handler made, which that `unsafe`
                      // method's caller promised keeps the trait's contract and which is checked
                      // to be at least `len` bytes long.
unsafe impl Kernel for FakeKernel {
    fn open_rdwr(&self, path: &Path) -> Result<OwnedFd, Errno> {
        self.log(Call::Open(path.to_path_buf()));
        match self.with(|s| s.open_error) {
            Some(e) => Err(e),
            None => Ok(dummy_fd()),
        }
    }

    fn char_dev(&self, _fd: BorrowedFd<'_>) -> Result<u64, Errno> {
        self.with(|s| s.char_dev).ok_or(Errno::ENODEV)
    }

    unsafe fn ioctl(&self, _fd: BorrowedFd<'_>, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        cmd.check()?;
        for a in cmd.attrs() {
            a.check_len()?;
        }
        self.log(Call::Ioctl {
            object: cmd.object_id,
            method: cmd.method_id,
        });
        let shape = IoctlShape {
            object: cmd.object_id,
            method: cmd.method_id,
            driver_id: cmd.driver_id,
            attrs: cmd
                .attrs()
                .iter()
                .map(|a| {
                    let kind = match a.buf {
                        AttrBuf::Inline => AttrKind::Inline,
                        AttrBuf::In(_) => AttrKind::In,
                        AttrBuf::Out(_) => AttrKind::Out,
                        AttrBuf::Fd(_) => AttrKind::Fd,
                        AttrBuf::NewFd(_) => AttrKind::NewFd,
                        AttrBuf::NewObject => AttrKind::NewObject,
                    };
                    (a.id, kind, a.len, a.flags)
                })
                .collect(),
        };
        self.with(|s| s.ioctls.push(shape));
        match self.with(|s| s.ioctl.clone()) {
            Some(h) => call(&h, |f| f(cmd)),
            None => Err(Errno::ENOTTY),
        }
    }

    unsafe fn write_cmd(&self, _fd: BorrowedFd<'_>, cmd: &mut WriteCmd<'_>) -> Result<(), Errno> {
        self.log(Call::Write(cmd.command));
        match self.with(|s| s.write.clone()) {
            Some(h) => call(&h, |f| f(cmd)),
            None => Err(Errno::EOPNOTSUPP),
        }
    }

    unsafe fn write(&self, _fd: BorrowedFd<'_>, buf: &[u8]) -> Result<usize, Errno> {
        self.log(Call::RawWrite(buf.len()));
        match self.with(|s| s.raw_write.clone()) {
            Some(h) => call(&h, |f| f(buf)),
            None => Err(Errno::EOPNOTSUPP),
        }
    }

    unsafe fn ucma(&self, fd: BorrowedFd<'_>, cmd: &mut UcmaCmd<'_>) -> Result<(), Errno> {
        let handler = self.with(|s| s.ucma.clone());
        let buf = cmd.framed()?;
        let Some(h) = handler else {
            // SAFETY: this fake's `write` only hands the bytes to a handler.
            return unsafe { self.write(fd, &buf) }.map(|_| ());
        };
        self.log(Call::RawWrite(buf.len()));
        call(&h, |f| f(&buf, cmd.response))
    }

    fn read(&self, fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize, Errno> {
        let nonblocking = self.is_nonblocking(fd.as_raw_fd());
        self.read_as(fd, buf, nonblocking)
    }

    fn wait_readable(
        &self,
        fd: BorrowedFd<'_>,
        timeout: Option<Duration>,
    ) -> Result<Readiness, Errno> {
        let raw = fd.as_raw_fd();
        if let Some(wait) = self.with(|s| s.wait.clone()) {
            return wait(timeout);
        }
        self.wait_queued(fd, raw, timeout)
    }
    fn set_nonblocking(&self, fd: BorrowedFd<'_>, nonblocking: bool) -> Result<bool, Errno> {
        // The flag of the real file: a new fd never inherits an old one's.
        crate::sys::Linux.set_nonblocking(fd, nonblocking)
    }

    fn mmap(
        &self,
        _fd: BorrowedFd<'_>,
        len: usize,
        offset: u64,
        _prot: Protection,
    ) -> Result<Mapping, Errno> {
        self.log(Call::Mmap(len, offset));
        match self.with(|s| s.mmap.clone()) {
            Some(h) => call(&h, |f| f(offset, len)).and_then(|m| {
                if m.len() >= len {
                    Ok(m)
                } else {
                    Err(Errno::EINVAL)
                }
            }),
            None => memmap2::MmapOptions::new()
                .len(len)
                .map_anon()
                .map(Mapping::from)
                .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::ENOMEM))),
        }
    }

    fn netlink_rdma(&self, request: &[u8], on_message: &mut dyn FnMut(&[u8])) -> Result<(), Errno> {
        let kind = request
            .get(4..6)
            .map(|b| u16::from_ne_bytes([b[0], b[1]]))
            .unwrap_or(0);
        self.log(Call::Netlink(kind));
        let result = match self.with(|s| s.netlink.clone()) {
            Some(h) => call(&h, |f| f(request)),
            None => Err(Errno::EPROTONOSUPPORT),
        };
        for msg in result? {
            on_message(&msg);
        }
        Ok(())
    }

    fn read_to_string(&self, path: &Path) -> std::io::Result<String> {
        self.with(|s| s.files.get(path).cloned())
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOENT))
    }

    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<OsString>> {
        let mut names: Vec<OsString> = self.with(|s| {
            s.files
                .keys()
                .filter_map(|p| p.strip_prefix(path).ok())
                .filter_map(|rest| rest.components().next())
                .map(|c| c.as_os_str().to_os_string())
                .collect()
        });
        names.sort();
        names.dedup();
        if names.is_empty() {
            return Err(std::io::Error::from_raw_os_error(libc::ENOENT));
        }
        Ok(names)
    }
}
