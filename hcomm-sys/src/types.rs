//! Opaque handles and `#[repr(C)]` structs, with compile-time layout checks.
//!
//! Layouts are the LP64 (x86-64 / aarch64 Linux) layouts of `hccl_types.h` and `nccl.h`.

#![allow(non_camel_case_types, non_snake_case)]

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::fmt;
use std::mem::{align_of, offset_of, size_of};

use crate::codes::{HcclDataType, HcclSendRecvType};

/// `HcclComm`: opaque communicator handle (`void*`).
pub type HcclComm = *mut c_void;
/// `aclrtStream`: opaque ACL stream handle (`void*`).
pub type aclrtStream = *mut c_void;
/// `aclrtContext`: opaque ACL context handle (`void*`).
pub type aclrtContext = *mut c_void;
/// `ncclComm_t`: opaque NCCL communicator handle (`struct ncclComm*`).
pub type ncclComm_t = *mut c_void;
/// `cudaStream_t`: opaque CUDA stream handle (`struct CUstream_st*`).
pub type cudaStream_t = *mut c_void;

/// `HCCL_ROOT_INFO_BYTES`.
pub const HCCL_ROOT_INFO_BYTES: usize = 4108;
/// `COMM_NAME_MAX_LENGTH`.
pub const COMM_NAME_MAX_LENGTH: usize = 128;
/// `UDI_MAX_LENGTH`.
pub const UDI_MAX_LENGTH: usize = 128;
/// `BUFFER_NAME_MAX_LENGTH`.
pub const BUFFER_NAME_MAX_LENGTH: usize = 128;
/// `HCCL_COMM_ALGO_MAX_LENGTH`.
pub const HCCL_COMM_ALGO_MAX_LENGTH: usize = 1600;
/// `HCCL_COMM_RETRY_ENABLE_MAX_LENGTH`.
pub const HCCL_COMM_RETRY_ENABLE_MAX_LENGTH: usize = 50;
/// `HCCL_COMM_RETRY_PARAMS_MAX_LENGTH`.
pub const HCCL_COMM_RETRY_PARAMS_MAX_LENGTH: usize = 128;
/// `HCCL_COMM_CONFIG_INFO_BYTES`: size of the config header.
pub const HCCL_COMM_CONFIG_INFO_BYTES: usize = 24;
/// `HCCL_COMM_CONFIG_MAGIC_WORD`.
pub const HCCL_COMM_CONFIG_MAGIC_WORD: u32 = 0xF0F0_F0F0;
/// `HCCL_COMM_CONFIG_VERSION` of the layout declared here (HCCL's `hccl_types.h`).
pub const HCCL_COMM_CONFIG_VERSION: u32 = 11;
/// `HCCL_COMM_DEFAULT_BUFFSIZE` in MB (what "not set" resolves to without env).
pub const HCCL_COMM_DEFAULT_BUFFSIZE: u32 = 200;
/// "Not set" sentinel of the `u32` config fields (buffer size, deterministic, traffic class, service level, `QoS`, SQ depth).
pub const HCCL_COMM_CONFIG_NOT_SET: u32 = 0xFFFF_FFFF;
/// "Not set" sentinel of `hcclExecTimeOut`.
pub const HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET: i32 = -1;
/// `HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE` in GB.
pub const HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE: u64 = 16;
/// `cudaStreamNonBlocking`: flag of `cudaStreamCreateWithFlags`; the stream does not
/// synchronise with the legacy default stream (`cudaStreamDefault` is 0).
#[allow(non_upper_case_globals)]
pub const cudaStreamNonBlocking: c_uint = 1;
/// `NCCL_UNIQUE_ID_BYTES`.
pub const NCCL_UNIQUE_ID_BYTES: usize = 128;
/// `NCCL_SPLIT_NOCOLOR`.
pub const NCCL_SPLIT_NOCOLOR: c_int = -1;
/// `NCCL_CONFIG_UNDEF_INT`.
pub const NCCL_CONFIG_UNDEF_INT: c_int = c_int::MIN;
/// Magic of `ncclConfig_t`.
pub const NCCL_CONFIG_MAGIC: c_uint = 0xcafe_beef;
/// The `version` this crate writes into `ncclConfig_t`: `NCCL_VERSION(2,17,0)`,
/// the oldest NCCL with `ncclConfig_t`, so every later NCCL accepts it. The
/// struct declared is NCCL 2.18's (it adds `splitShare`), whose C tag still
/// reads `ncclConfig_v21700`.
pub const NCCL_CONFIG_VERSION: c_uint = 21700;

/// `HcclRootInfo`: 4108 opaque bytes produced by `HcclGetRootInfo` on the root rank
/// and handed to every rank out of band.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct HcclRootInfo {
    /// The opaque bytes (`char internal[HCCL_ROOT_INFO_BYTES]`).
    pub internal: [u8; HCCL_ROOT_INFO_BYTES],
}

impl HcclRootInfo {
    /// All-zero root info (to be filled by `HcclGetRootInfo`).
    pub const fn zeroed() -> Self {
        Self {
            internal: [0; HCCL_ROOT_INFO_BYTES],
        }
    }

    /// The bytes, for sending to the other ranks.
    pub fn as_bytes(&self) -> &[u8] {
        &self.internal
    }

    /// Rebuilds root info from received bytes; `None` unless exactly 4108 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        Some(Self {
            internal: bytes.try_into().ok()?,
        })
    }
}

impl Default for HcclRootInfo {
    fn default() -> Self {
        Self::zeroed()
    }
}

impl fmt::Debug for HcclRootInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HcclRootInfo({} bytes)", self.internal.len())
    }
}

/// `HcclSendRecvItem`: one entry of `HcclBatchSendRecv`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HcclSendRecvItem {
    /// Send or receive.
    pub sendRecvType: HcclSendRecvType,
    /// Device buffer.
    pub buf: *mut c_void,
    /// Element count.
    pub count: u64,
    /// Element type.
    pub dataType: HcclDataType,
    /// Peer rank in the communicator.
    pub remoteRank: u32,
}

/// The 24-byte ABI header at the start of [`HcclCommConfig`] (`char reserved[24]` in C,
/// written through a `configInfo_t*` by `HcclCommConfigInit`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HcclCommConfigHeader {
    /// `sizeof` the struct the caller filled.
    pub size: usize,
    /// [`HCCL_COMM_CONFIG_MAGIC_WORD`].
    pub magicWord: u32,
    /// Config version; the library reads only fields introduced at or before it.
    pub version: u32,
    /// Zero.
    pub reserved: u64,
}

/// `HcclCommConfig`, version 11 layout (2248 bytes, align 8).
///
/// Build it with [`HcclCommConfig::new`], which does what the header's
/// `static inline HcclCommConfigInit` does (that function is not an exported
/// symbol), then change the fields you need.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct HcclCommConfig {
    /// ABI header (size, magic word, version).
    pub header: HcclCommConfigHeader,
    /// CCL buffer size in MB (>= 1); not set: env `HCCL_BUFFSIZE`, then 200. Since v1.
    pub hcclBufferSize: u32,
    /// 0 off, 1 on, 2 strict. Since v1.
    pub hcclDeterministic: u32,
    /// Unique communicator name, NUL-terminated; automatic if empty. Since v2.
    pub hcclCommName: [c_char; COMM_NAME_MAX_LENGTH],
    /// User-defined information. Since v3.
    pub hcclUdi: [c_char; UDI_MAX_LENGTH],
    /// Op expansion mode (0 default). Since v4.
    pub hcclOpExpansionMode: u32,
    /// RDMA traffic class. Since v5.
    pub hcclRdmaTrafficClass: u32,
    /// RDMA service level. Since v5.
    pub hcclRdmaServiceLevel: u32,
    /// World rank id (NSLB-DP). Since v6.
    pub hcclWorldRankID: u32,
    /// Job id (NSLB-DP). Since v6.
    pub hcclJobID: u64,
    /// ACL graph zero-copy (0/1). Since v7.
    pub aclGraphZeroCopyEnable: u8,
    /// Execution timeout in seconds; -1: env `HCCL_EXEC_TIMEOUT`. Since v8.
    pub hcclExecTimeOut: i32,
    /// Algorithm selection, `HCCL_ALGO` syntax. Since v8.
    pub hcclAlgo: [c_char; HCCL_COMM_ALGO_MAX_LENGTH],
    /// Retry enable string (A3 only). Since v8.
    pub hcclRetryEnable: [c_char; HCCL_COMM_RETRY_ENABLE_MAX_LENGTH],
    /// Retry parameters. Since v8.
    pub hcclRetryParams: [c_char; HCCL_COMM_RETRY_PARAMS_MAX_LENGTH],
    /// Shared CCL buffer name. Since v9.
    pub hcclBufferName: [c_char; BUFFER_NAME_MAX_LENGTH],
    /// Quality of service 0-7. Since v10.
    pub hcclQos: u32,
    /// Symmetric window size per rank in GB. Since v10.
    pub hcclSymWinMaxMemSizePerRank: u64,
    /// Channel SQ depth (A5 only). Since v11.
    pub hcclChannelSqDepth: u32,
}

impl HcclCommConfig {
    /// A config with every field "not set", exactly as `HcclCommConfigInit` leaves it.
    pub fn new() -> Self {
        Self {
            header: HcclCommConfigHeader {
                size: size_of::<Self>(),
                magicWord: HCCL_COMM_CONFIG_MAGIC_WORD,
                version: HCCL_COMM_CONFIG_VERSION,
                reserved: 0,
            },
            hcclBufferSize: HCCL_COMM_CONFIG_NOT_SET,
            hcclDeterministic: HCCL_COMM_CONFIG_NOT_SET,
            hcclCommName: [0; COMM_NAME_MAX_LENGTH],
            hcclUdi: [0; UDI_MAX_LENGTH],
            hcclOpExpansionMode: 0,
            hcclRdmaTrafficClass: HCCL_COMM_CONFIG_NOT_SET,
            hcclRdmaServiceLevel: HCCL_COMM_CONFIG_NOT_SET,
            hcclWorldRankID: 0,
            hcclJobID: 0,
            aclGraphZeroCopyEnable: 0,
            hcclExecTimeOut: HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET,
            hcclAlgo: [0; HCCL_COMM_ALGO_MAX_LENGTH],
            hcclRetryEnable: [0; HCCL_COMM_RETRY_ENABLE_MAX_LENGTH],
            hcclRetryParams: [0; HCCL_COMM_RETRY_PARAMS_MAX_LENGTH],
            hcclBufferName: [0; BUFFER_NAME_MAX_LENGTH],
            hcclQos: HCCL_COMM_CONFIG_NOT_SET,
            hcclSymWinMaxMemSizePerRank: HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE,
            hcclChannelSqDepth: HCCL_COMM_CONFIG_NOT_SET,
        }
    }

    /// Sets `hcclCommName`; `false` (and nothing changed) if `name` contains a NUL
    /// or does not fit in 127 bytes.
    pub fn set_comm_name(&mut self, name: &str) -> bool {
        copy_c_str(&mut self.hcclCommName, name)
    }

    /// `hcclCommName` up to its NUL, lossily decoded.
    pub fn comm_name(&self) -> String {
        read_c_str(&self.hcclCommName)
    }

    /// Sets `hcclAlgo` (`HCCL_ALGO` syntax); `false` if it contains a NUL or is too long.
    pub fn set_algo(&mut self, algo: &str) -> bool {
        copy_c_str(&mut self.hcclAlgo, algo)
    }
}

impl Default for HcclCommConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for HcclCommConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HcclCommConfig")
            .field("header", &self.header)
            .field("hcclBufferSize", &self.hcclBufferSize)
            .field("hcclDeterministic", &self.hcclDeterministic)
            .field("hcclCommName", &self.comm_name())
            .field("hcclOpExpansionMode", &self.hcclOpExpansionMode)
            .field("hcclExecTimeOut", &self.hcclExecTimeOut)
            .field("hcclAlgo", &read_c_str(&self.hcclAlgo))
            .finish_non_exhaustive()
    }
}

fn copy_c_str(dst: &mut [c_char], src: &str) -> bool {
    let bytes = src.as_bytes();
    if bytes.len() >= dst.len() || bytes.contains(&0) {
        return false;
    }
    for (d, &b) in dst.iter_mut().zip(bytes) {
        *d = b as c_char;
    }
    dst[bytes.len()..].fill(0);
    true
}

fn read_c_str(src: &[c_char]) -> String {
    let bytes: Vec<u8> = src.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `ncclUniqueId`: 128 opaque bytes from `ncclGetUniqueId`, passed **by value**.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ncclUniqueId {
    /// The opaque bytes.
    pub internal: [u8; NCCL_UNIQUE_ID_BYTES],
}

impl ncclUniqueId {
    /// All-zero id (to be filled by `ncclGetUniqueId`).
    pub const fn zeroed() -> Self {
        Self {
            internal: [0; NCCL_UNIQUE_ID_BYTES],
        }
    }

    /// Rebuilds an id from received bytes; `None` unless exactly 128 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        Some(Self {
            internal: bytes.try_into().ok()?,
        })
    }
}

impl Default for ncclUniqueId {
    fn default() -> Self {
        Self::zeroed()
    }
}

impl fmt::Debug for ncclUniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ncclUniqueId(128 bytes)")
    }
}

/// `ncclConfig_t` as NCCL 2.18 declares it (48 bytes; the C tag still reads
/// `ncclConfig_v21700`): NCCL 2.17's fields, which end at `netName` (40 bytes),
/// plus `splitShare`. Later NCCLs append fields (`trafficClass`, `commName`,
/// ...) after these; `size` and `version` tell NCCL which ones this struct
/// has. Build it with
/// [`ncclConfig_t::new`] (what `NCCL_CONFIG_INITIALIZER` does).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ncclConfig_t {
    /// `sizeof` this struct.
    pub size: usize,
    /// [`NCCL_CONFIG_MAGIC`].
    pub magic: c_uint,
    /// [`NCCL_CONFIG_VERSION`].
    pub version: c_uint,
    /// 1 blocking (default), 0 non-blocking.
    pub blocking: c_int,
    /// CGA cluster size.
    pub cgaClusterSize: c_int,
    /// Minimum CTAs.
    pub minCTAs: c_int,
    /// Maximum CTAs.
    pub maxCTAs: c_int,
    /// Network to use (NUL-terminated) or null.
    pub netName: *const c_char,
    /// Allow split communicators to share resources.
    pub splitShare: c_int,
}

impl ncclConfig_t {
    /// Every field undefined (`INT_MIN` / null), as `NCCL_CONFIG_INITIALIZER`.
    pub fn new() -> Self {
        Self {
            size: size_of::<Self>(),
            magic: NCCL_CONFIG_MAGIC,
            version: NCCL_CONFIG_VERSION,
            blocking: NCCL_CONFIG_UNDEF_INT,
            cgaClusterSize: NCCL_CONFIG_UNDEF_INT,
            minCTAs: NCCL_CONFIG_UNDEF_INT,
            maxCTAs: NCCL_CONFIG_UNDEF_INT,
            netName: std::ptr::null(),
            splitShare: NCCL_CONFIG_UNDEF_INT,
        }
    }
}

impl Default for ncclConfig_t {
    fn default() -> Self {
        Self::new()
    }
}

// --- compile-time layout checks ----------------------------------------------

const _: () = {
    assert!(size_of::<HcclRootInfo>() == 4108);
    assert!(align_of::<HcclRootInfo>() == 1);

    assert!(size_of::<HcclSendRecvItem>() == 32);
    assert!(align_of::<HcclSendRecvItem>() == 8);
    assert!(offset_of!(HcclSendRecvItem, sendRecvType) == 0);
    assert!(offset_of!(HcclSendRecvItem, buf) == 8);
    assert!(offset_of!(HcclSendRecvItem, count) == 16);
    assert!(offset_of!(HcclSendRecvItem, dataType) == 24);
    assert!(offset_of!(HcclSendRecvItem, remoteRank) == 28);

    assert!(size_of::<HcclCommConfigHeader>() == HCCL_COMM_CONFIG_INFO_BYTES);
    assert!(offset_of!(HcclCommConfigHeader, size) == 0);
    assert!(offset_of!(HcclCommConfigHeader, magicWord) == 8);
    assert!(offset_of!(HcclCommConfigHeader, version) == 12);
    assert!(offset_of!(HcclCommConfigHeader, reserved) == 16);

    assert!(size_of::<HcclCommConfig>() == 2248);
    assert!(align_of::<HcclCommConfig>() == 8);
    assert!(offset_of!(HcclCommConfig, header) == 0);
    assert!(offset_of!(HcclCommConfig, hcclBufferSize) == 24);
    assert!(offset_of!(HcclCommConfig, hcclDeterministic) == 28);
    assert!(offset_of!(HcclCommConfig, hcclCommName) == 32);
    assert!(offset_of!(HcclCommConfig, hcclUdi) == 160);
    assert!(offset_of!(HcclCommConfig, hcclOpExpansionMode) == 288);
    assert!(offset_of!(HcclCommConfig, hcclRdmaTrafficClass) == 292);
    assert!(offset_of!(HcclCommConfig, hcclRdmaServiceLevel) == 296);
    assert!(offset_of!(HcclCommConfig, hcclWorldRankID) == 300);
    assert!(offset_of!(HcclCommConfig, hcclJobID) == 304);
    assert!(offset_of!(HcclCommConfig, aclGraphZeroCopyEnable) == 312);
    assert!(offset_of!(HcclCommConfig, hcclExecTimeOut) == 316);
    assert!(offset_of!(HcclCommConfig, hcclAlgo) == 320);
    assert!(offset_of!(HcclCommConfig, hcclRetryEnable) == 1920);
    assert!(offset_of!(HcclCommConfig, hcclRetryParams) == 1970);
    assert!(offset_of!(HcclCommConfig, hcclBufferName) == 2098);
    assert!(offset_of!(HcclCommConfig, hcclQos) == 2228);
    assert!(offset_of!(HcclCommConfig, hcclSymWinMaxMemSizePerRank) == 2232);
    assert!(offset_of!(HcclCommConfig, hcclChannelSqDepth) == 2240);

    assert!(size_of::<ncclUniqueId>() == 128);
    assert!(align_of::<ncclUniqueId>() == 1);
    assert!(size_of::<ncclConfig_t>() == 48);
    assert!(offset_of!(ncclConfig_t, netName) == 32);
    assert!(offset_of!(ncclConfig_t, splitShare) == 40);

    // C enums are `int`-sized.
    assert!(size_of::<HcclDataType>() == 4);
    assert!(size_of::<HcclSendRecvType>() == 4);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_abi_md() {
        let item = [
            ("sendRecvType", offset_of!(HcclSendRecvItem, sendRecvType), 0),
            ("buf", offset_of!(HcclSendRecvItem, buf), 8),
            ("count", offset_of!(HcclSendRecvItem, count), 16),
            ("dataType", offset_of!(HcclSendRecvItem, dataType), 24),
            ("remoteRank", offset_of!(HcclSendRecvItem, remoteRank), 28),
        ];
        println!("HcclSendRecvItem: size {}", size_of::<HcclSendRecvItem>());
        for (name, got, want) in item {
            println!("  {name:<14} {got}");
            assert_eq!(got, want, "HcclSendRecvItem.{name}");
        }
        let config = [
            ("header", offset_of!(HcclCommConfig, header), 0),
            ("hcclBufferSize", offset_of!(HcclCommConfig, hcclBufferSize), 24),
            ("hcclDeterministic", offset_of!(HcclCommConfig, hcclDeterministic), 28),
            ("hcclCommName", offset_of!(HcclCommConfig, hcclCommName), 32),
            ("hcclUdi", offset_of!(HcclCommConfig, hcclUdi), 160),
            (
                "hcclOpExpansionMode",
                offset_of!(HcclCommConfig, hcclOpExpansionMode),
                288,
            ),
            (
                "hcclRdmaTrafficClass",
                offset_of!(HcclCommConfig, hcclRdmaTrafficClass),
                292,
            ),
            (
                "hcclRdmaServiceLevel",
                offset_of!(HcclCommConfig, hcclRdmaServiceLevel),
                296,
            ),
            ("hcclWorldRankID", offset_of!(HcclCommConfig, hcclWorldRankID), 300),
            ("hcclJobID", offset_of!(HcclCommConfig, hcclJobID), 304),
            (
                "aclGraphZeroCopyEnable",
                offset_of!(HcclCommConfig, aclGraphZeroCopyEnable),
                312,
            ),
            ("hcclExecTimeOut", offset_of!(HcclCommConfig, hcclExecTimeOut), 316),
            ("hcclAlgo", offset_of!(HcclCommConfig, hcclAlgo), 320),
            ("hcclRetryEnable", offset_of!(HcclCommConfig, hcclRetryEnable), 1920),
            ("hcclRetryParams", offset_of!(HcclCommConfig, hcclRetryParams), 1970),
            ("hcclBufferName", offset_of!(HcclCommConfig, hcclBufferName), 2098),
            ("hcclQos", offset_of!(HcclCommConfig, hcclQos), 2228),
            (
                "hcclSymWinMaxMemSizePerRank",
                offset_of!(HcclCommConfig, hcclSymWinMaxMemSizePerRank),
                2232,
            ),
            (
                "hcclChannelSqDepth",
                offset_of!(HcclCommConfig, hcclChannelSqDepth),
                2240,
            ),
        ];
        println!("HcclCommConfig: size {}", size_of::<HcclCommConfig>());
        for (name, got, want) in config {
            println!("  {name:<28} {got}");
            assert_eq!(got, want, "HcclCommConfig.{name}");
        }
        assert_eq!(size_of::<HcclCommConfig>(), 2248);
        assert_eq!(size_of::<HcclRootInfo>(), 4108);
        assert_eq!(size_of::<ncclUniqueId>(), 128);
    }

    #[test]
    fn config_new_matches_hccl_comm_config_init() {
        let c = HcclCommConfig::new();
        // Read the header back as raw bytes, as the library does.
        // SAFETY: HcclCommConfig is repr(C), fully initialised, and at least 24 bytes.
        let raw: &[u8] = unsafe { std::slice::from_raw_parts(std::ptr::from_ref(&c).cast::<u8>(), 24) };
        assert_eq!(&raw[0..8], &2248_usize.to_ne_bytes());
        assert_eq!(&raw[8..12], &0xF0F0_F0F0_u32.to_ne_bytes());
        assert_eq!(&raw[12..16], &11_u32.to_ne_bytes());
        assert_eq!(&raw[16..24], &[0; 8]);
        assert_eq!(c.hcclBufferSize, u32::MAX);
        assert_eq!(c.hcclDeterministic, u32::MAX);
        assert_eq!(c.hcclRdmaTrafficClass, u32::MAX);
        assert_eq!(c.hcclRdmaServiceLevel, u32::MAX);
        assert_eq!(c.hcclQos, u32::MAX);
        assert_eq!(c.hcclChannelSqDepth, u32::MAX);
        assert_eq!(c.hcclExecTimeOut, -1);
        assert_eq!(c.hcclOpExpansionMode, 0);
        assert_eq!(c.hcclSymWinMaxMemSizePerRank, 16);
        assert_eq!(c.comm_name(), "");
    }

    #[test]
    fn comm_name_round_trips_and_rejects_overlong() {
        let mut c = HcclCommConfig::new();
        assert!(c.set_comm_name("tp_group_0"));
        assert_eq!(c.comm_name(), "tp_group_0");
        assert!(!c.set_comm_name(&"x".repeat(128)));
        assert!(!c.set_comm_name("a\0b"));
        assert_eq!(c.comm_name(), "tp_group_0");
    }

    #[test]
    fn root_info_bytes_round_trip() {
        let mut r = HcclRootInfo::zeroed();
        r.internal[4107] = 7;
        let back = HcclRootInfo::from_bytes(r.as_bytes()).unwrap();
        assert_eq!(back, r);
        assert!(HcclRootInfo::from_bytes(&[0; 12]).is_none());
    }
}
