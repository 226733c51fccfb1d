//! The loading errors users see, through the explicit-path and explicit-environment
//! APIs (no process environment is mutated here, so tests can run in parallel).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use hcomm_sys::{AclApi, CudaApi, HcclApi, LoadError, NcclApi};

/// A unique scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hcomm-sys-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// An environment holding only `vars`.
fn env_of<'a>(vars: &'a [(&'static str, PathBuf)]) -> impl Fn(&str) -> Option<OsString> + 'a {
    move |name| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone().into_os_string())
    }
}

/// A system library that certainly exists and has none of the vendor symbols.
fn system_lib() -> PathBuf {
    for dir in [
        "/lib/x86_64-linux-gnu",
        "/lib/aarch64-linux-gnu",
        "/lib64",
        "/usr/lib64",
        "/lib",
    ] {
        let p = Path::new(dir).join("libm.so.6");
        if p.exists() {
            return p;
        }
    }
    PathBuf::from("libm.so.6")
}

#[test]
fn override_variable_naming_a_missing_file_lists_that_path() {
    let missing = scratch("override").join("nope/libhccl.so");
    let env = [("HCOMM_HCCL_LIB", missing.clone())];
    let err = HcclApi::search_with(&env_of(&env)).unwrap_err();
    let msg = err.to_string();
    println!("{msg}");
    assert_eq!(
        msg,
        format!(
            "HCCL library not found; tried:\n  {} (HCOMM_HCCL_LIB): no such file\n\
             hint: set HCOMM_HCCL_LIB to the full path of libhccl.so, or run \
             `source /usr/local/Ascend/cann/set_env.sh` (sets ASCEND_HOME_PATH and LD_LIBRARY_PATH)",
            missing.display()
        )
    );
    match err {
        LoadError::NotFound { library, tried, .. } => {
            assert_eq!(library, "HCCL");
            assert_eq!(tried.len(), 1, "an override is the only candidate: {tried:?}");
            assert_eq!(tried[0].path, missing);
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
}

#[test]
fn override_variable_naming_a_directory_looks_for_every_file_name_in_it() {
    let dir = scratch("override-dir");
    let env = [("HCOMM_ACL_LIB", dir.clone())];
    let err = AclApi::search_with(&env_of(&env)).unwrap_err();
    println!("{err}");
    let LoadError::NotFound { tried, .. } = err else {
        panic!("expected NotFound, got {err:?}");
    };
    let paths: Vec<PathBuf> = tried.into_iter().map(|a| a.path).collect();
    assert_eq!(paths, [dir.join("libascendcl.so"), dir.join("libacl_rt.so")]);
}

#[test]
fn search_with_nothing_found_lists_every_candidate() {
    let root = scratch("ascend-home");
    let toolkit = scratch("toolkit-home");
    let env = [
        ("ASCEND_HOME_PATH", root.clone()),
        ("ASCEND_TOOLKIT_HOME", toolkit.clone()),
    ];
    let err = HcclApi::search_with(&env_of(&env)).unwrap_err();
    let msg = err.to_string();
    println!("{msg}");
    let LoadError::NotFound { library, tried, hint } = &err else {
        panic!("expected NotFound, got {err:?}");
    };
    assert_eq!(*library, "HCCL");
    let paths: Vec<PathBuf> = tried.iter().map(|a| a.path.clone()).collect();
    assert_eq!(
        paths,
        [
            root.join("lib64/libhccl.so"),
            toolkit.join("lib64/libhccl.so"),
            PathBuf::from("/usr/local/Ascend/cann/lib64/libhccl.so"),
            PathBuf::from("/usr/local/Ascend/ascend-toolkit/latest/lib64/libhccl.so"),
            PathBuf::from("libhccl.so"),
        ]
    );
    assert!(msg.starts_with("HCCL library not found; tried:\n"));
    assert!(msg.contains(&format!(
        "  {} ($ASCEND_HOME_PATH/lib64): no such file\n",
        root.join("lib64/libhccl.so").display()
    )));
    assert!(msg.contains("  libhccl.so (system search path): "), "{msg}");
    assert!(hint.contains("HCOMM_HCCL_LIB") && hint.contains("set_env.sh") && hint.contains("LD_LIBRARY_PATH"));
    assert!(msg.ends_with(hint));
}

#[test]
fn nvidia_search_lists_every_soname() {
    let cuda = scratch("cuda-home");
    let env = [("CUDA_HOME", cuda.clone())];
    let Err(LoadError::NotFound { tried, .. }) = NcclApi::search_with(&env_of(&env)) else {
        // A machine with NCCL installed finds it by bare name; nothing to check then.
        return;
    };
    let paths: Vec<PathBuf> = tried.into_iter().map(|a| a.path).collect();
    assert_eq!(
        paths,
        [
            cuda.join("lib64/libnccl.so.2"),
            cuda.join("lib64/libnccl.so"),
            cuda.join("lib/libnccl.so.2"),
            cuda.join("lib/libnccl.so"),
            PathBuf::from("/usr/local/cuda/lib64/libnccl.so.2"),
            PathBuf::from("/usr/local/cuda/lib64/libnccl.so"),
            PathBuf::from("libnccl.so.2"),
            PathBuf::from("libnccl.so"),
        ]
    );
    if let Err(LoadError::NotFound { tried, .. }) = CudaApi::search_with(&env_of(&[])) {
        let names: Vec<String> = tried.iter().map(|a| a.path.display().to_string()).collect();
        for soname in ["libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11"] {
            assert!(names.iter().any(|n| n == soname), "{soname} missing from {names:?}");
        }
    }
}

#[test]
fn explicit_missing_file_is_a_bad_path() {
    let path = scratch("explicit").join("libhccl.so");
    let err = HcclApi::load(&path).unwrap_err();
    println!("{err}");
    assert_eq!(
        err.to_string(),
        format!("cannot load HCCL library `{}`: no such file", path.display())
    );
    assert!(matches!(err, LoadError::BadPath { library: "HCCL", .. }));
}

#[test]
fn text_file_is_a_bad_path_with_the_dlopen_message() {
    let path = scratch("text").join("libhccl.so");
    std::fs::write(&path, "this is not an ELF shared object\n").unwrap();
    let err = HcclApi::load(&path).unwrap_err();
    let msg = err.to_string();
    println!("{msg}");
    let LoadError::BadPath {
        library,
        path: p,
        message,
    } = &err
    else {
        panic!("expected BadPath, got {err:?}");
    };
    assert_eq!(*library, "HCCL");
    assert_eq!(p, &path);
    // glibc says "invalid ELF header" (or "file too short" for tiny files).
    assert!(
        message.contains("invalid ELF header") || message.contains("file too short"),
        "{message}"
    );
    assert!(msg.starts_with(&format!("cannot load HCCL library `{}`: ", path.display())));

    // The same file through the override variable is a bad path too.
    let env = [("HCOMM_HCCL_LIB", path.clone())];
    let err = HcclApi::search_with(&env_of(&env)).unwrap_err();
    assert!(matches!(err, LoadError::BadPath { .. }), "{err:?}");
}

#[test]
fn system_library_lacking_the_symbols_is_a_missing_symbol() {
    let lib = system_lib();
    let err = HcclApi::load(&lib).unwrap_err();
    let msg = err.to_string();
    println!("{msg}");
    let LoadError::MissingSymbol {
        library,
        symbol,
        path,
        fallback,
    } = &err
    else {
        panic!("expected MissingSymbol, got {err:?}");
    };
    assert_eq!((*library, *symbol), ("HCCL", "HcclGetRootInfo"));
    assert_eq!(path, &lib);
    assert_eq!(fallback, &None, "no libhcomm.so next to {}", lib.display());
    assert!(msg.starts_with(&format!(
        "symbol `HcclGetRootInfo` not found in HCCL library `{}`",
        lib.display()
    )));

    let first = |e: LoadError| match e {
        LoadError::MissingSymbol { symbol, .. } => symbol,
        other => panic!("expected MissingSymbol, got {other:?}"),
    };
    assert_eq!(first(AclApi::load(&lib).unwrap_err()), "aclInit");
    assert_eq!(first(NcclApi::load(&lib).unwrap_err()), "ncclGetVersion");
    assert_eq!(first(CudaApi::load(&lib).unwrap_err()), "cudaSetDevice");
}

#[test]
fn bare_name_is_resolved_by_the_system_search() {
    // A bare name goes to dlopen's own search (LD_LIBRARY_PATH, ld cache).
    let err = HcclApi::load("libc.so.6").unwrap_err();
    assert!(
        matches!(
            err,
            LoadError::MissingSymbol {
                symbol: "HcclGetRootInfo",
                ..
            }
        ),
        "{err:?}"
    );
    let err = HcclApi::load("libdoes-not-exist-hcomm.so").unwrap_err();
    println!("{err}");
    assert!(matches!(err, LoadError::BadPath { .. }), "{err:?}");
}

#[test]
fn pip_wheels_of_a_virtual_env_and_cuda_home_lib_are_searched() {
    // A virtual environment with the two wheels' directories (files that
    // are not libraries, so the attempts fail with dlopen's reason) and a
    // CUDA_HOME with `lib/`, as pip-installed toolkits lay it out.
    let venv = scratch("venv");
    let site = venv.join("lib/python3.12/site-packages");
    for (sub, file) in [
        ("nvidia/nccl/lib", "libnccl.so.2"),
        ("nvidia/cuda_runtime/lib", "libcudart.so.12"),
    ] {
        std::fs::create_dir_all(site.join(sub)).unwrap();
        std::fs::write(site.join(sub).join(file), b"not a library").unwrap();
    }
    let cuda = scratch("cuda-home-lib");
    let env = [("VIRTUAL_ENV", venv.clone()), ("CUDA_HOME", cuda.clone())];
    let Err(LoadError::NotFound { tried, hint, .. }) = NcclApi::search_with(&env_of(&env)) else {
        // A machine with NCCL installed finds it by bare name; nothing to check then.
        return;
    };
    let wheel = tried
        .iter()
        .find(|a| a.path == site.join("nvidia/nccl/lib/libnccl.so.2"))
        .unwrap_or_else(|| panic!("the wheel's libnccl.so.2 not tried: {tried:?}"));
    assert_eq!(wheel.origin, "pip wheel of $VIRTUAL_ENV");
    assert_ne!(wheel.outcome, "no such file", "{wheel:?}");
    assert!(tried
        .iter()
        .any(|a| a.path == cuda.join("lib/libnccl.so.2") && a.origin == "$CUDA_HOME/lib"));
    assert!(hint.contains("site-packages/nvidia/nccl/lib"), "{hint}");
    let lookup = env_of(&env);
    if let Err(LoadError::NotFound { tried, hint, .. }) = CudaApi::search_with(&lookup) {
        let a = tried
            .iter()
            .find(|a| a.path == site.join("nvidia/cuda_runtime/lib/libcudart.so.12"))
            .unwrap_or_else(|| panic!("the wheel's libcudart.so.12 not tried: {tried:?}"));
        assert_eq!(a.origin, "pip wheel of $VIRTUAL_ENV");
        assert!(hint.contains("nvidia/cuda_runtime/lib"), "{hint}");
    }
}
