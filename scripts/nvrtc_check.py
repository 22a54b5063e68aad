#!/usr/bin/env python3
"""Compile marrow's GPU kernels for sm_90 with NVRTC, on a machine with no GPU.

Uses the NVRTC of PyPI's nvidia-cuda-nvrtc (pinned to 13.0, the series the
H200 machine's driver 580 runs), loaded with ctypes. Checks that every
kernel is present and that the doorbell is one st.mmio store. Exit 0 on
success; prints NVRTC's log and exits 1 otherwise.

With MARROW_NVRTC_PTX_OUT=FILE in the environment it also writes the PTX
there, so that two trees' device code can be compared instruction for
instruction (a change said to only rename things should leave it equal).
"""
import ctypes
import glob
import os
import re
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
site = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "target", "nvrtc")
libdir = os.path.join(site, "nvidia", "cu13", "lib")
libs = sorted(glob.glob(os.path.join(libdir, "libnvrtc.so*")))
libs = [l for l in libs if "builtins" not in l]
if not libs:
    sys.exit(f"nvrtc_check: no libnvrtc.so under {libdir} (run scripts/nvrtc-check.sh)")
# libnvrtc loads libnvrtc-builtins from its own directory.
for b in glob.glob(os.path.join(libdir, "libnvrtc-builtins.so*")):
    ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
nvrtc = ctypes.CDLL(libs[0])

def check(status, what, prog=None):
    if status != 0:
        nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
        msg = nvrtc.nvrtcGetErrorString(status).decode()
        if prog is not None:
            size = ctypes.c_size_t()
            nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            nvrtc.nvrtcGetProgramLog(prog, log)
            print(log.value.decode(errors="replace"))
        sys.exit(f"nvrtc_check: {what}: {msg}")

major, minor = ctypes.c_int(), ctypes.c_int()
check(nvrtc.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
src_path = os.path.join(root, "kernels", "gpu", "marrow_kernels.cu")
src = open(src_path, "rb").read()
# Every extern "C" __global__ function of the source must come out of the compile.
kernels = re.findall(r'extern "C" __global__ void (\w+)\(', open(src_path).read())
if not kernels:
    sys.exit("nvrtc_check: no kernels found in " + src_path)

for arch, getter in (("compute_90", "PTX"), ("sm_90", "CUBIN")):
    prog = ctypes.c_void_p()
    check(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src, b"marrow_kernels.cu", 0, None, None), "create")
    opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17",
            ("-I" + os.path.join(root, "kernels", "include")).encode()]
    # The tuning knobs `marrow` passes from the same variable (kernels/README.md).
    opts += [f"-D{d.strip()}".encode() for d in os.environ.get("MARROW_NVRTC_DEFINE", "").split(",") if d.strip()]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    check(nvrtc.nvrtcCompileProgram(prog, len(opts), arr), f"compile for {arch}", prog)
    size = ctypes.c_size_t()
    check(getattr(nvrtc, f"nvrtcGet{getter}Size")(prog, ctypes.byref(size)), f"{getter} size")
    out = ctypes.create_string_buffer(size.value)
    check(getattr(nvrtc, f"nvrtcGet{getter}")(prog, out), getter)
    data = out.raw
    missing = [k for k in kernels if k.encode() not in data]
    if missing:
        sys.exit(f"nvrtc_check: {arch} output lacks {missing}")
    if getter == "PTX":
        ptx = data.decode(errors="replace")
        if os.environ.get("MARROW_NVRTC_PTX_OUT"):
            with open(os.environ["MARROW_NVRTC_PTX_OUT"], "w") as f:
                f.write(ptx.rstrip("\0"))
        if "st.mmio.relaxed.sys.global.b64" not in ptx:
            sys.exit("nvrtc_check: the doorbell is not an st.mmio.relaxed.sys store")
        if "globaltimer" not in ptx:
            sys.exit("nvrtc_check: the device-side timeouts do not read %globaltimer")
        # The Channel (config, cached keys, an exclusive owner's heads) must
        # live in registers: in local memory, the L1 invalidation of every
        # system-scope fence sends each later use of it to L2 (measured on
        # the H200: most of a post's cost over its stores and fences).
        for m in re.finditer(r"\.entry (\w+)\(", ptx):
            body = ptx[m.start():ptx.find("\n}\n", m.start())]
            if "__local_depot" in body:
                n = body.count("ld.local") + body.count("st.local")
                sys.exit(f"nvrtc_check: kernel {m.group(1)} uses local memory ({n} ld/st.local): "
                         "something in it is indexed at run time or has its address taken")
    print(f"nvrtc_check: NVRTC {major.value}.{minor.value}: {len(kernels)} kernels compiled for {arch} "
          f"({getter}, {size.value} bytes)")
