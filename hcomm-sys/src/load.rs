//! Library search and loading, and the [`LoadError`] users see when it fails.
//!
//! Lookup order:
//!
//! 1. an explicit path (`XxxApi::load(path)`), which is never cached;
//! 2. the override variable (`HCOMM_HCCL_LIB`, `HCOMM_ACL_LIB`, `HCOMM_NCCL_LIB`,
//!    `HCOMM_CUDART_LIB`): a file, or a directory holding one of the file names.
//!    When it is set nothing else is tried, so a typo never silently loads another
//!    library;
//! 3. install directories from the environment and then their defaults
//!    (`$ASCEND_HOME_PATH/lib64`, `$ASCEND_TOOLKIT_HOME/lib64`,
//!    `/usr/local/Ascend/cann/lib64`, `/usr/local/Ascend/ascend-toolkit/latest/lib64`
//!    for Ascend; `$CUDA_HOME/lib64` and `/lib`, `$CUDA_PATH/lib64` and `/lib`,
//!    `/usr/local/cuda/lib64` for NVIDIA), each with every file name of the
//!    library; then, for NVIDIA, the pip wheels' directories (`nvidia/nccl/lib`,
//!    `nvidia/cuda_runtime/lib`, `nvidia/cu13/lib`) in the `site-packages` of
//!    `$VIRTUAL_ENV`, `$CONDA_PREFIX`, the running Python, `python3` on
//!    `PATH`, the user's and the system's Python;
//! 4. the bare file names, which `dlopen` resolves through `LD_LIBRARY_PATH`,
//!    the ld cache and the system directories.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use libloading::Library;

/// Where and under which names one library is searched.
#[derive(Debug, Clone, Copy)]
pub struct LibrarySpec {
    /// Human name used in messages (`"HCCL"`).
    pub library: &'static str,
    /// Override variable holding a file (or directory) path.
    pub env_var: &'static str,
    /// File names, in order of preference.
    pub file_names: &'static [&'static str],
    /// Variables naming install roots, with the sub-directory holding the libraries.
    pub root_vars: &'static [(&'static str, &'static str)],
    /// Default install directories tried after `root_vars`.
    pub default_dirs: &'static [&'static str],
    /// Directories of pip wheels holding the library, relative to a Python
    /// environment's `site-packages` (`nvidia/nccl/lib`).
    pub wheel_dirs: &'static [&'static str],
    /// Second library searched for symbols the first lacks (`libhcomm.so` for HCCL).
    pub fallback: Option<&'static str>,
    /// Hint appended to "not found" errors.
    pub hint: &'static str,
}

const ASCEND_ROOTS: &[(&str, &str)] = &[("ASCEND_HOME_PATH", "lib64"), ("ASCEND_TOOLKIT_HOME", "lib64")];
const ASCEND_DIRS: &[&str] = &[
    "/usr/local/Ascend/cann/lib64",
    "/usr/local/Ascend/ascend-toolkit/latest/lib64",
];
const CUDA_ROOTS: &[(&str, &str)] = &[
    ("CUDA_HOME", "lib64"),
    ("CUDA_HOME", "lib"),
    ("CUDA_PATH", "lib64"),
    ("CUDA_PATH", "lib"),
];
const CUDA_DIRS: &[&str] = &["/usr/local/cuda/lib64"];

/// HCCL: `libhccl.so`, with `libhcomm.so` as the fallback for management symbols.
pub const HCCL: LibrarySpec = LibrarySpec {
    library: "HCCL",
    env_var: "HCOMM_HCCL_LIB",
    file_names: &["libhccl.so"],
    root_vars: ASCEND_ROOTS,
    default_dirs: ASCEND_DIRS,
    wheel_dirs: &[],
    fallback: Some("libhcomm.so"),
    hint: "hint: set HCOMM_HCCL_LIB to the full path of libhccl.so, or run \
           `source /usr/local/Ascend/cann/set_env.sh` (sets ASCEND_HOME_PATH and LD_LIBRARY_PATH)",
};

/// ACL runtime: `libascendcl.so`, then `libacl_rt.so`.
pub const ACL: LibrarySpec = LibrarySpec {
    library: "ACL runtime",
    env_var: "HCOMM_ACL_LIB",
    file_names: &["libascendcl.so", "libacl_rt.so"],
    root_vars: ASCEND_ROOTS,
    default_dirs: ASCEND_DIRS,
    wheel_dirs: &[],
    fallback: None,
    hint: "hint: set HCOMM_ACL_LIB to the full path of libascendcl.so, or run \
           `source /usr/local/Ascend/cann/set_env.sh` (sets ASCEND_HOME_PATH and LD_LIBRARY_PATH)",
};

/// NCCL: `libnccl.so.2` (the soname), then `libnccl.so`.
pub const NCCL: LibrarySpec = LibrarySpec {
    library: "NCCL",
    env_var: "HCOMM_NCCL_LIB",
    file_names: &["libnccl.so.2", "libnccl.so"],
    root_vars: CUDA_ROOTS,
    default_dirs: CUDA_DIRS,
    wheel_dirs: &["nvidia/nccl/lib"],
    fallback: None,
    hint: "hint: set HCOMM_NCCL_LIB to the full path of libnccl.so.2, or add its directory \
           to LD_LIBRARY_PATH; `pip install nvidia-nccl-cu12` (or -cu13) puts it in \
           site-packages/nvidia/nccl/lib of the Python environment, which is searched (VIRTUAL_ENV, \
           CONDA_PREFIX, python3 on PATH)",
};

/// CUDA runtime: `libcudart.so`, then the versioned sonames, newest first.
pub const CUDART: LibrarySpec = LibrarySpec {
    library: "CUDA runtime",
    env_var: "HCOMM_CUDART_LIB",
    file_names: &[
        "libcudart.so",
        "libcudart.so.13",
        "libcudart.so.12",
        "libcudart.so.11.0",
        "libcudart.so.11",
    ],
    root_vars: CUDA_ROOTS,
    default_dirs: CUDA_DIRS,
    wheel_dirs: &["nvidia/cuda_runtime/lib", "nvidia/cu13/lib"],
    fallback: None,
    hint: "hint: set HCOMM_CUDART_LIB to the full path of libcudart.so, or add the CUDA \
           lib64 directory to LD_LIBRARY_PATH; `pip install nvidia-cuda-runtime-cu12` puts it in \
           site-packages/nvidia/cuda_runtime/lib of the Python environment, which is searched \
           (VIRTUAL_ENV, CONDA_PREFIX, python3 on PATH)",
};

/// One place a library was looked for, and what happened there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The path or bare name passed to `dlopen` (or checked for existence).
    pub path: PathBuf,
    /// Where the candidate came from (`"HCOMM_HCCL_LIB"`, `"$ASCEND_HOME_PATH/lib64"`,
    /// `"default install directory"`, `"system search path"`).
    pub origin: String,
    /// Why it was not used (`"no such file"` or the `dlopen` message).
    pub outcome: String,
}

/// Why a library or one of its symbols could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadError {
    /// No candidate could be loaded; lists every place tried.
    NotFound {
        /// Human library name (`"HCCL"`).
        library: &'static str,
        /// Every candidate, in order, with the reason it failed.
        tried: Vec<Attempt>,
        /// What the user can do about it.
        hint: &'static str,
    },
    /// An explicitly given file is missing or not a loadable library.
    BadPath {
        /// Human library name.
        library: &'static str,
        /// The path given.
        path: PathBuf,
        /// `"no such file"` or the `dlopen` message.
        message: String,
    },
    /// The library was loaded but lacks a symbol (required at load time, or an
    /// optional one at the time it is used).
    MissingSymbol {
        /// Human library name.
        library: &'static str,
        /// The C symbol.
        symbol: &'static str,
        /// The library file the symbol was looked up in.
        path: PathBuf,
        /// A second library also searched (`libhcomm.so` for HCCL), if it was loaded.
        fallback: Option<PathBuf>,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::NotFound { library, tried, hint } => {
                write!(f, "{library} library not found; tried:")?;
                for a in tried {
                    write!(f, "\n  {} ({}): {}", a.path.display(), a.origin, a.outcome)?;
                }
                write!(f, "\n{hint}")
            }
            LoadError::BadPath { library, path, message } => {
                write!(f, "cannot load {library} library `{}`: {message}", path.display())
            }
            LoadError::MissingSymbol {
                library,
                symbol,
                path,
                fallback,
            } => {
                write!(
                    f,
                    "symbol `{symbol}` not found in {library} library `{}`",
                    path.display()
                )?;
                if let Some(fb) = fallback {
                    write!(f, " nor in `{}`", fb.display())?;
                }
                write!(
                    f,
                    "\nhint: this library version may be too old for `{symbol}`, or the file is not the {library} library"
                )
            }
        }
    }
}

impl std::error::Error for LoadError {}

/// Reads one environment variable; tests pass their own to avoid mutating the process env.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// The process environment, as an [`EnvLookup`].
pub fn process_env(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}

/// Every candidate of `spec` in search order, *excluding* the override variable
/// (which, when set, is the only candidate).
pub fn candidates(spec: &LibrarySpec, env: EnvLookup<'_>) -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    let mut push = |path: PathBuf, origin: String| {
        if !out.iter().any(|(p, _)| *p == path) {
            out.push((path, origin));
        }
    };
    for (var, sub) in spec.root_vars {
        if let Some(root) = env(var) {
            let dir = Path::new(&root).join(sub);
            for name in spec.file_names {
                push(dir.join(name), format!("${var}/{sub}"));
            }
        }
    }
    for dir in spec.default_dirs {
        for name in spec.file_names {
            push(Path::new(dir).join(name), "default install directory".to_owned());
        }
    }
    if !spec.wheel_dirs.is_empty() {
        for (site, origin, always) in python_site_dirs(env) {
            for sub in spec.wheel_dirs {
                let dir = site.join(sub);
                if always || dir.is_dir() {
                    for name in spec.file_names {
                        push(dir.join(name), format!("pip wheel of {origin}"));
                    }
                }
            }
        }
    }
    for name in spec.file_names {
        push(PathBuf::from(name), "system search path".to_owned());
    }
    out
}

/// `site-packages` (and Debian's `dist-packages`) directories of the Python
/// environments in reach: `$VIRTUAL_ENV` and `$CONDA_PREFIX` (always listed,
/// as the user named them: `true`), the running executable's when it is a
/// Python interpreter, `python3` on `PATH`, the user's and the system's
/// (listed only where the wheel directory exists).
fn python_site_dirs(env: EnvLookup<'_>) -> Vec<(PathBuf, String, bool)> {
    let mut prefixes: Vec<(PathBuf, String, bool)> = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(p) = env(var) {
            prefixes.push((PathBuf::from(p), format!("${var}"), true));
        }
    }
    if let Ok(exe) = std::env::current_exe() {
        let is_python = exe
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("python"));
        if let (true, Some(prefix)) = (is_python, exe.parent().and_then(Path::parent)) {
            prefixes.push((prefix.to_path_buf(), "the running python".to_owned(), false));
        }
    }
    if let Some(path) = env("PATH") {
        if let Some(prefix) = std::env::split_paths(&path)
            .find(|d| d.join("python3").is_file())
            .and_then(|d| d.parent().map(Path::to_path_buf))
        {
            prefixes.push((prefix, "python3 on PATH".to_owned(), false));
        }
    }
    if let Some(home) = env("HOME") {
        prefixes.push((Path::new(&home).join(".local"), "the user's python".to_owned(), false));
    }
    prefixes.push((PathBuf::from("/usr/local"), "the system python".to_owned(), false));
    prefixes.push((PathBuf::from("/usr"), "the system python".to_owned(), false));
    let mut out = Vec::new();
    for (prefix, origin, always) in prefixes {
        for lib in ["lib", "lib64"] {
            let Ok(entries) = std::fs::read_dir(prefix.join(lib)) else {
                continue;
            };
            let mut versions: Vec<PathBuf> = entries
                .filter_map(std::result::Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("python3"))
                })
                .collect();
            versions.sort();
            for v in versions {
                for site in ["site-packages", "dist-packages"] {
                    let dir = v.join(site);
                    if dir.is_dir() {
                        out.push((dir, origin.clone(), always));
                    }
                }
            }
        }
    }
    out
}

/// An opened library (plus its lazily opened fallback) to resolve symbols from.
pub(crate) struct Handles {
    spec: LibrarySpec,
    lib: Library,
    path: PathBuf,
    fallback: Option<(Library, PathBuf)>,
}

impl fmt::Debug for Handles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handles")
            .field("library", &self.spec.library)
            .field("path", &self.path)
            .field("fallback", &self.fallback.as_ref().map(|(_, p)| p))
            .finish_non_exhaustive()
    }
}

fn open(path: &Path) -> Result<Library, String> {
    // SAFETY: loading a library runs its initialisers. The libraries this crate
    // loads (HCCL, ACL, NCCL, CUDA runtime, or a stand-in) have initialisers with
    // no preconditions on the caller; the user chose the file.
    unsafe { Library::new(path) }.map_err(|e| e.to_string())
}

fn is_bare(path: &Path) -> bool {
    path.components().count() == 1 && !path.is_absolute()
}

impl Handles {
    /// Opens exactly `path`.
    pub(crate) fn open_path(spec: LibrarySpec, path: &Path) -> Result<Self, LoadError> {
        if !is_bare(path) && !path.exists() {
            return Err(LoadError::BadPath {
                library: spec.library,
                path: path.to_owned(),
                message: "no such file".to_owned(),
            });
        }
        match open(path) {
            Ok(lib) => Ok(Self::new(spec, lib, path.to_owned())),
            Err(message) => Err(LoadError::BadPath {
                library: spec.library,
                path: path.to_owned(),
                message,
            }),
        }
    }

    /// Runs the search described in the module docs.
    pub(crate) fn search(spec: LibrarySpec, env: EnvLookup<'_>) -> Result<Self, LoadError> {
        if let Some(value) = env(spec.env_var) {
            let given = PathBuf::from(value);
            let files: Vec<PathBuf> = if given.is_dir() {
                spec.file_names.iter().map(|n| given.join(n)).collect()
            } else {
                vec![given]
            };
            let mut tried = Vec::new();
            for file in files {
                if !file.exists() {
                    tried.push(Attempt {
                        path: file,
                        origin: spec.env_var.to_owned(),
                        outcome: "no such file".to_owned(),
                    });
                    continue;
                }
                return Self::open_path(spec, &file);
            }
            return Err(LoadError::NotFound {
                library: spec.library,
                tried,
                hint: spec.hint,
            });
        }
        let mut tried = Vec::new();
        for (path, origin) in candidates(&spec, env) {
            if !is_bare(&path) && !path.exists() {
                tried.push(Attempt {
                    path,
                    origin,
                    outcome: "no such file".to_owned(),
                });
                continue;
            }
            match open(&path) {
                Ok(lib) => return Ok(Self::new(spec, lib, path)),
                Err(outcome) => tried.push(Attempt { path, origin, outcome }),
            }
        }
        Err(LoadError::NotFound {
            library: spec.library,
            tried,
            hint: spec.hint,
        })
    }

    fn new(spec: LibrarySpec, lib: Library, path: PathBuf) -> Self {
        Self {
            spec,
            lib,
            path,
            fallback: None,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn library(&self) -> &'static str {
        self.spec.library
    }

    pub(crate) fn fallback_path(&self) -> Option<&Path> {
        self.fallback.as_ref().map(|(_, p)| p.as_path())
    }

    /// Opens the fallback library (next to the primary one, or by bare name when
    /// the primary was found by bare name); silently absent if it cannot be opened.
    fn open_fallback(&mut self) {
        let Some(name) = self.spec.fallback else {
            return;
        };
        if self.fallback.is_some() {
            return;
        }
        let candidate = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.join(name),
            _ => PathBuf::from(name),
        };
        if !is_bare(&candidate) && !candidate.exists() {
            return;
        }
        if let Ok(lib) = open(&candidate) {
            self.fallback = Some((lib, candidate));
        }
    }

    /// Looks `name` up in the primary library, then in the fallback.
    ///
    /// # Safety
    ///
    /// `T` must be the exact function-pointer type of the C symbol `name`
    /// (`name` is NUL-terminated).
    pub(crate) unsafe fn symbol<T: Copy>(&mut self, name: &'static str) -> Option<T> {
        // SAFETY: `T` matches the symbol's C prototype per this fn's contract; the
        // copied pointer is only used while `self` (owning the library) is alive,
        // which the function tables guarantee by owning `self`.
        if let Ok(sym) = unsafe { self.lib.get::<T>(name.as_bytes()) } {
            return Some(*sym);
        }
        self.open_fallback();
        let (fallback, _) = self.fallback.as_ref()?;
        // SAFETY: as above, for the fallback library.
        unsafe { fallback.get::<T>(name.as_bytes()) }.ok().map(|s| *s)
    }

    /// Like [`symbol`](Self::symbol) but a missing symbol is a [`LoadError::MissingSymbol`].
    ///
    /// # Safety
    ///
    /// As [`symbol`](Self::symbol).
    pub(crate) unsafe fn required<T: Copy>(&mut self, name: &'static str) -> Result<T, LoadError> {
        // SAFETY: forwarded contract.
        unsafe { self.symbol(name) }.ok_or_else(|| self.missing(name.trim_end_matches('\0')))
    }

    pub(crate) fn missing(&self, symbol: &'static str) -> LoadError {
        LoadError::MissingSymbol {
            library: self.spec.library,
            symbol,
            path: self.path.clone(),
            fallback: self.fallback_path().map(Path::to_owned),
        }
    }
}

/// Declares a function table: the struct, its loader and its `get`/`load`/`search` API.
macro_rules! api_table {
    (
        $(#[$meta:meta])*
        pub struct $api:ident : $spec:expr, $cell:ident;
        required {
            $( $(#[$rmeta:meta])* fn $req:ident ( $($rarg:ident : $raty:ty),* $(,)? ) $(-> $rret:ty)? ; )*
        }
        optional {
            $( $(#[$ometa:meta])* fn $opt:ident ( $($oarg:ident : $oaty:ty),* $(,)? ) $(-> $oret:ty)? ; )*
        }
    ) => {
        $(#[$meta])*
        #[allow(non_snake_case)]
        pub struct $api {
            _lib: $crate::load::Handles,
            $( $(#[$rmeta])* pub $req: unsafe extern "C" fn($($rarg: $raty),*) $(-> $rret)?, )*
            $(
                $(#[$ometa])*
                ///
                /// Version-dependent: `None` when the loaded library lacks it; use
                #[doc = concat!("[`require_fn!`](crate::require_fn)`(api, ", stringify!($opt), ")`")]
                /// to get it or a [`LoadError::MissingSymbol`](crate::LoadError::MissingSymbol).
                pub $opt: Option<unsafe extern "C" fn($($oarg: $oaty),*) $(-> $oret)?>,
            )*
        }

        static $cell: std::sync::OnceLock<Result<$api, $crate::LoadError>> = std::sync::OnceLock::new();

        impl $api {
            /// Every function of this table as declared here: its C name, its
            /// parameter types and its return type (`""` for none), each as
            /// Rust source text, for probes that check them against the C header.
            pub const PROTOTYPES: &'static [(&'static str, &'static [&'static str], &'static str)] = &[
                $( (stringify!($req), &[$(stringify!($raty)),*], stringify!($($rret)?)), )*
                $( (stringify!($opt), &[$(stringify!($oaty)),*], stringify!($($oret)?)), )*
            ];

            /// The process-wide table, searched for and loaded on first use (see
            /// [`load`](crate::load) for the search order). Never panics; the error is
            /// cached too.
            pub fn get() -> Result<&'static Self, $crate::LoadError> {
                $cell
                    .get_or_init(Self::search)
                    .as_ref()
                    .map_err(Clone::clone)
            }

            /// The process-wide table if a previous [`get`](Self::get) loaded it; never loads.
            pub fn get_loaded() -> Option<&'static Self> {
                $cell.get().and_then(|r| r.as_ref().ok())
            }

            /// Loads exactly the library at `path` into a new table (not cached; the
            /// library is unloaded when the table is dropped).
            pub fn load(path: impl AsRef<std::path::Path>) -> Result<Self, $crate::LoadError> {
                Self::from_handles($crate::load::Handles::open_path($spec, path.as_ref())?)
            }

            /// Searches the process environment (uncached).
            pub fn search() -> Result<Self, $crate::LoadError> {
                Self::search_with(&$crate::load::process_env)
            }

            /// Searches with `env` standing in for the process environment (uncached).
            pub fn search_with(env: $crate::load::EnvLookup<'_>) -> Result<Self, $crate::LoadError> {
                Self::from_handles($crate::load::Handles::search($spec, env)?)
            }

            /// The file the table was loaded from (a bare name if found by `dlopen`'s own search).
            pub fn path(&self) -> &std::path::Path {
                self._lib.path()
            }

            /// Turns an optional entry into the function or a [`LoadError::MissingSymbol`](crate::LoadError::MissingSymbol)
            /// naming `symbol`; prefer [`require_fn!`](crate::require_fn).
            pub fn require<F: Copy>(&self, f: Option<F>, symbol: &'static str) -> Result<F, $crate::LoadError> {
                f.ok_or_else(|| self._lib.missing(symbol))
            }

            /// The human library name used in errors.
            pub fn library(&self) -> &'static str {
                self._lib.library()
            }

            fn from_handles(mut lib: $crate::load::Handles) -> Result<Self, $crate::LoadError> {
                let table = Self {
                    $(
                        // SAFETY: the field type is the C prototype of this symbol.
                        $req: unsafe { lib.required(concat!(stringify!($req), "\0"))? },
                    )*
                    $(
                        // SAFETY: the field type is the C prototype of this symbol.
                        $opt: unsafe { lib.symbol(concat!(stringify!($opt), "\0")) },
                    )*
                    _lib: lib,
                };
                table.on_load();
                Ok(table)
            }
        }

        impl std::fmt::Debug for $api {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let optional: &[(&str, bool)] = &[$( (stringify!($opt), self.$opt.is_none()) ),*];
                let missing: Vec<&str> = optional
                    .iter()
                    .filter_map(|&(n, m)| m.then_some(n))
                    .collect();
                f.debug_struct(stringify!($api))
                    .field("path", &self.path())
                    .field("missing_optional", &missing)
                    .finish_non_exhaustive()
            }
        }

        const _: () = {
            const fn assert_send_sync<T: Send + Sync>() {}
            assert_send_sync::<$api>();
        };
    };
}

pub(crate) use api_table;

/// Gets an optional entry of a function table, or a [`LoadError::MissingSymbol`]
/// naming it: `let f = require_fn!(api, HcclGroupStart)?;`.
#[macro_export]
macro_rules! require_fn {
    ($api:expr, $symbol:ident) => {{
        let api = &$api;
        api.require(api.$symbol, stringify!($symbol))
    }};
}
