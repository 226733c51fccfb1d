//! Raw C ABI of HCCL, ACL, NCCL and the CUDA runtime, loaded at run time.
