//! The real NCCL and CUDA runtime libraries from the package registry (`scripts/nccl-wheels.sh`):
//! an ABI probe compiled against the wheels' `nccl.h` and `cuda_runtime_api.h`
//! checks every prototype, enum value, constant and struct offset this crate
//! declares, and the libraries load and report the header's versions.
//!
//! Runs where `HCOMM_NCCL_WHEELS` names the environment the script made (CI
//! sets it); elsewhere each test says why it was skipped and passes. A set
//! variable whose files are missing fails.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

use hcomm_sys::{
    cudaError_t, cudaMemcpyKind, ncclConfig_t, ncclDataType_t, ncclRedOp_t, ncclResult_t, ncclUniqueId, CudaApi,
    NcclApi, NCCL_CONFIG_MAGIC, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_VERSION, NCCL_SPLIT_NOCOLOR, NCCL_UNIQUE_ID_BYTES,
};

/// The wheel environment's libraries, found by this crate's own search of
/// a virtual environment (`VIRTUAL_ENV` naming it, as an activated
/// environment does), or why the test is skipped.
fn wheels() -> Option<(NcclApi, CudaApi)> {
    let Some(root) = std::env::var_os("HCOMM_NCCL_WHEELS").filter(|v| !v.is_empty()) else {
        eprintln!("skipped: HCOMM_NCCL_WHEELS is not set (scripts/nccl-wheels.sh makes the environment)");
        return None;
    };
    let env = |name: &str| (name == "VIRTUAL_ENV").then(|| root.clone());
    let nccl = NcclApi::search_with(&env).unwrap_or_else(|e| panic!("{e}"));
    let cuda = CudaApi::search_with(&env).unwrap_or_else(|e| panic!("{e}"));
    for path in [nccl.path(), cuda.path()] {
        assert!(path.starts_with(&root), "{} is not the wheel's", path.display());
    }
    Some((nccl, cuda))
}

/// `site-packages/nvidia` of the wheels (`nvidia/nccl/lib/libnccl.so.2`).
fn nvidia_dir(nccl: &NcclApi) -> PathBuf {
    nccl.path()
        .ancestors()
        .nth(3)
        .expect("site-packages/nvidia/nccl/lib")
        .to_path_buf()
}

/// A Rust type of a prototype (`stringify!` text) as C text.
fn c_type(rust: &str) -> String {
    let t = rust.trim();
    if let Some(rest) = t.strip_prefix("*const") {
        return format!("{} const*", c_type(rest));
    }
    if let Some(rest) = t.strip_prefix("*mut") {
        return format!("{}*", c_type(rest));
    }
    match t {
        "" | "c_void" => "void".to_owned(),
        "c_int" | "i32" => "int".to_owned(),
        "c_uint" | "u32" => "unsigned int".to_owned(),
        "c_char" => "char".to_owned(),
        "usize" => "size_t".to_owned(),
        "u64" => "uint64_t".to_owned(),
        "i64" => "int64_t".to_owned(),
        // C names this enum without a typedef.
        "cudaMemcpyKind" => "enum cudaMemcpyKind".to_owned(),
        // Every other type is named after its C typedef (ncclComm_t, cudaStream_t, ...).
        other => other.to_owned(),
    }
}

/// The probe's source: compile-time checks of every prototype, then one
/// `name value` line per constant, offset and initializer field.
fn probe_source() -> String {
    let mut src = String::from(
        "#include <nccl.h>\n#include <cuda_runtime_api.h>\n#include <stddef.h>\n#include <stdio.h>\n#include <stdint.h>\n\n",
    );
    for (name, args, ret) in NcclApi::PROTOTYPES.iter().chain(CudaApi::PROTOTYPES) {
        let args: Vec<String> = args.iter().map(|a| c_type(a)).collect();
        writeln!(
            src,
            "_Static_assert(__builtin_types_compatible_p(__typeof__(&{name}), {} (*)({})), \"prototype of {name}\");",
            c_type(ret),
            args.join(", ")
        )
        .unwrap();
    }
    src.push_str("\nint main() {\n  ncclConfig_t init = NCCL_CONFIG_INITIALIZER;\n");
    let mut line = |key: &str, expr: &str| {
        writeln!(src, "  printf(\"%s %lld\\n\", \"{key}\", (long long)({expr}));").unwrap();
    };
    let enums: [&[(&str, i32)]; 5] = [
        &named(ncclResult_t::NAMED, |v| v.0),
        &named(ncclDataType_t::NAMED, |v| v.0),
        &named(ncclRedOp_t::NAMED, |v| v.0),
        &named(cudaError_t::NAMED, |v| v.0),
        &named(cudaMemcpyKind::NAMED, |v| v.0),
    ];
    for (name, _) in enums.iter().copied().flatten() {
        line(name, name);
    }
    for key in [
        "NCCL_UNIQUE_ID_BYTES",
        "NCCL_SPLIT_NOCOLOR",
        "NCCL_CONFIG_UNDEF_INT",
        "NCCL_VERSION_CODE",
        "CUDART_VERSION",
        "cudaStreamNonBlocking",
    ] {
        line(key, key);
    }
    line("sizeof(ncclUniqueId)", "sizeof(ncclUniqueId)");
    line("sizeof(cudaStream_t)", "sizeof(cudaStream_t)");
    for field in CONFIG_FIELDS {
        line(
            &format!("offsetof(ncclConfig_t, {field})"),
            &format!("offsetof(ncclConfig_t, {field})"),
        );
    }
    for field in [
        "magic",
        "blocking",
        "cgaClusterSize",
        "minCTAs",
        "maxCTAs",
        "splitShare",
    ] {
        line(&format!("init.{field}"), &format!("init.{field}"));
    }
    line("init.netName == NULL", "init.netName == NULL");
    line("init.version", "init.version");
    line("init.size", "init.size");
    src.push_str("  return 0;\n}\n");
    src
}

/// The fields of this crate's `ncclConfig_t`, in order.
const CONFIG_FIELDS: [&str; 9] = [
    "size",
    "magic",
    "version",
    "blocking",
    "cgaClusterSize",
    "minCTAs",
    "maxCTAs",
    "netName",
    "splitShare",
];

fn named<T: Copy>(values: &[(&'static str, T)], raw: impl Fn(T) -> i32) -> Vec<(&'static str, i32)> {
    values.iter().map(|&(n, v)| (n, raw(v))).collect()
}

/// Compiles and runs the probe; its `name value` lines.
fn run_probe(nvidia: &Path, test: &str) -> BTreeMap<String, i64> {
    let dir = std::env::temp_dir().join(format!("hcomm-nccl-probe-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("probe.c"), dir.join("probe"));
    std::fs::write(&src, probe_source()).unwrap();
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let mut cmd = Command::new(&compiler);
    for inc in ["cuda_cccl", "cuda_nvcc", "cuda_runtime", "nccl"] {
        cmd.arg("-I").arg(nvidia.join(inc).join("include"));
    }
    let out = cmd
        .arg("-std=gnu11")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    assert!(
        out.status.success(),
        "the ABI probe does not compile against the wheel's headers (a prototype differs):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    let _ = std::fs::remove_dir_all(&dir);
    String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_owned(), v.parse().unwrap())
        })
        .collect()
}

#[test]
fn every_declared_prototype_constant_and_offset_matches_the_wheel_headers() {
    let Some((nccl, _)) = wheels() else { return };
    let c = run_probe(&nvidia_dir(&nccl), "abi");
    let mut expected: Vec<(String, i64)> = Vec::new();
    for (name, value) in [
        named(ncclResult_t::NAMED, |v| v.0),
        named(ncclDataType_t::NAMED, |v| v.0),
        named(ncclRedOp_t::NAMED, |v| v.0),
        named(cudaError_t::NAMED, |v| v.0),
        named(cudaMemcpyKind::NAMED, |v| v.0),
    ]
    .concat()
    {
        expected.push((name.to_owned(), value.into()));
    }
    let config = ncclConfig_t::new();
    expected.extend([
        ("NCCL_UNIQUE_ID_BYTES".to_owned(), NCCL_UNIQUE_ID_BYTES as i64),
        ("NCCL_SPLIT_NOCOLOR".to_owned(), NCCL_SPLIT_NOCOLOR.into()),
        ("NCCL_CONFIG_UNDEF_INT".to_owned(), NCCL_CONFIG_UNDEF_INT.into()),
        (
            "cudaStreamNonBlocking".to_owned(),
            hcomm_sys::cudaStreamNonBlocking.into(),
        ),
        ("sizeof(ncclUniqueId)".to_owned(), size_of::<ncclUniqueId>() as i64),
        (
            "sizeof(cudaStream_t)".to_owned(),
            size_of::<hcomm_sys::cudaStream_t>() as i64,
        ),
        ("init.magic".to_owned(), NCCL_CONFIG_MAGIC.into()),
        ("init.blocking".to_owned(), config.blocking.into()),
        ("init.cgaClusterSize".to_owned(), config.cgaClusterSize.into()),
        ("init.minCTAs".to_owned(), config.minCTAs.into()),
        ("init.maxCTAs".to_owned(), config.maxCTAs.into()),
        ("init.splitShare".to_owned(), config.splitShare.into()),
        ("init.netName == NULL".to_owned(), i64::from(config.netName.is_null())),
    ]);
    let offsets = [
        offset_of!(ncclConfig_t, size),
        offset_of!(ncclConfig_t, magic),
        offset_of!(ncclConfig_t, version),
        offset_of!(ncclConfig_t, blocking),
        offset_of!(ncclConfig_t, cgaClusterSize),
        offset_of!(ncclConfig_t, minCTAs),
        offset_of!(ncclConfig_t, maxCTAs),
        offset_of!(ncclConfig_t, netName),
        offset_of!(ncclConfig_t, splitShare),
    ];
    for (field, offset) in CONFIG_FIELDS.iter().zip(offsets) {
        expected.push((format!("offsetof(ncclConfig_t, {field})"), offset as i64));
    }
    let wrong: Vec<String> = expected
        .iter()
        .filter(|(k, v)| c.get(k) != Some(v))
        .map(|(k, v)| format!("{k}: hcomm-sys {v}, header {:?}", c.get(k)))
        .collect();
    assert!(wrong.is_empty(), "ABI mismatches:\n{}", wrong.join("\n"));
    // What this crate writes on purpose differs from a newer header's initializer:
    // an older version and the smaller size, both of which NCCL accepts.
    assert!(i64::from(NCCL_CONFIG_VERSION) <= c["init.version"], "{c:?}");
    assert!(size_of::<ncclConfig_t>() as i64 <= c["init.size"], "{c:?}");
    println!(
        "{} values and {} prototypes checked against NCCL {} / CUDA {}",
        expected.len(),
        NcclApi::PROTOTYPES.len() + CudaApi::PROTOTYPES.len(),
        c["NCCL_VERSION_CODE"],
        c["CUDART_VERSION"]
    );
}

#[test]
fn the_wheel_libraries_load_and_report_the_header_versions() {
    let Some((nccl, cuda)) = wheels() else { return };
    let c = run_probe(&nvidia_dir(&nccl), "load");
    assert_eq!(nccl.version().map(i64::from), Some(c["NCCL_VERSION_CODE"]));
    // Every optional symbol this crate declares is in this NCCL.
    for (name, present) in [
        ("ncclCommInitRankConfig", nccl.ncclCommInitRankConfig.is_some()),
        ("ncclCommFinalize", nccl.ncclCommFinalize.is_some()),
        ("ncclCommSplit", nccl.ncclCommSplit.is_some()),
        ("ncclGetLastError", nccl.ncclGetLastError.is_some()),
        ("ncclAlltoAll", nccl.ncclAlltoAll.is_some()),
        ("ncclGather", nccl.ncclGather.is_some()),
        ("ncclScatter", nccl.ncclScatter.is_some()),
    ] {
        assert!(present, "{name} missing from NCCL {}", c["NCCL_VERSION_CODE"]);
    }
    assert_eq!(cuda.runtime_version().map(i64::from), Some(c["CUDART_VERSION"]));
    // The error strings come from the real libraries.
    assert_eq!(
        nccl.error_string(ncclResult_t::ncclInvalidArgument).as_deref(),
        Some("invalid argument (run with NCCL_DEBUG=WARN for details)")
    );
}
