#!/usr/bin/env python3
"""NCCL (through PyTorch) and cudaMemcpyPeer reference numbers for the marrow
two-GPU comparison. Prints "RESULT <name> <value> <unit>", "NOTE ..." and
"SKIP ..." lines; see README.md."""
import os
import socket
import sys
import time
import traceback
from datetime import timedelta

# The machine's rules: no NVLink multicast (NVLS). Set before NCCL loads.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20]
PP_WARM, PP_ITERS = 100, 1000
BW_WARM, BW_ITERS = 3, 20


def out(line):
    print(line, flush=True)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, port):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=2, timeout=timedelta(seconds=90))
    peer = 1 - rank
    try:
        # (a) 8-byte ping-pong. Each round is causal (rank1 sends only after its
        # recv completed), so wall time / iterations is the round trip even
        # though the host enqueues ahead of the GPU.
        t = torch.zeros(1, dtype=torch.int64, device=dev)

        def rounds(n):
            for _ in range(n):
                if rank == 0:
                    dist.send(t, peer)
                    dist.recv(t, peer)
                else:
                    dist.recv(t, peer)
                    dist.send(t, peer)

        rounds(PP_WARM)  # also creates the 0<->1 P2P communicator
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        rounds(PP_ITERS)
        t_enq = time.perf_counter() - t0
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        if rank == 0:
            out(f"RESULT nccl_sendrecv_8B_rtt_us {dt / PP_ITERS * 1e6:.3f} us")
            # If enqueueing took nearly the whole time, the GPU was waiting on
            # PyTorch's per-call host work, and the RTT is a host-bound figure.
            out(f"NOTE nccl_sendrecv_8B host enqueue {t_enq / PP_ITERS * 1e6:.3f} us per round "
                f"(of {dt / PP_ITERS * 1e6:.3f}); close to the RTT means host-bound")

        # (b) one-way send bandwidth rank0 -> rank1.
        buf = torch.empty(max(SIZES), dtype=torch.uint8, device=dev)
        if rank == 0:
            out("NOTE nccl_send_bw is timed by the sender's CUDA events; a NCCL "
                "send completes only with its matching recv, so it includes the "
                "receiver's side")
        for n in SIZES:
            view = buf[:n]
            op = dist.send if rank == 0 else dist.recv
            for _ in range(BW_WARM):
                op(view, peer)
            torch.cuda.synchronize()
            dist.barrier()
            torch.cuda.synchronize()
            s = torch.cuda.current_stream()
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            e0.record(s)
            for _ in range(BW_ITERS):
                op(view, peer)
            e1.record(s)  # send's wait() made the current stream wait for NCCL's
            e1.synchronize()
            if rank == 0:
                ms = e0.elapsed_time(e1)
                out(f"RESULT nccl_send_bw_{n} {n * BW_ITERS / (ms * 1e-3) / 1e9:.3f} GB/s")
            dist.barrier()
    except Exception:
        out(f"FAILED nccl rank {rank}: {traceback.format_exc().strip().splitlines()[-1]}")
        traceback.print_exc()
        raise
    finally:
        try:
            dist.destroy_process_group()
        except Exception:
            pass


def copy_peer():
    """(c) single-process cross-device copy. With peer access on, PyTorch issues
    cudaMemcpyAsync on the source device's current stream (the peer-copy path)."""
    import torch

    out(f"NOTE torch.cuda.can_device_access_peer(0,1)={torch.cuda.can_device_access_peer(0, 1)}")
    src = torch.full((max(SIZES),), 0x5A, dtype=torch.uint8, device="cuda:0")
    dst = torch.zeros(max(SIZES), dtype=torch.uint8, device="cuda:1")
    with torch.cuda.device(0):
        s = torch.cuda.current_stream(0)
        for n in SIZES:
            a, b = src[:n], dst[:n]
            for _ in range(BW_WARM):
                b.copy_(a, non_blocking=True)
            torch.cuda.synchronize(0)
            torch.cuda.synchronize(1)
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            e0.record(s)
            for _ in range(BW_ITERS):
                b.copy_(a, non_blocking=True)
            e1.record(s)
            e1.synchronize()
            ms = e0.elapsed_time(e1)
            out(f"RESULT torch_copy_peer_bw_{n} {n * BW_ITERS / (ms * 1e-3) / 1e9:.3f} GB/s")
    torch.cuda.synchronize(1)
    ok = bool((dst[-1] == 0x5A).item())
    out(f"NOTE torch_copy_peer dst check {'ok' if ok else 'MISMATCH'}")


def main():
    try:
        import torch
        import torch.multiprocessing as mp
    except Exception as e:
        out(f"SKIP nccl_bench: torch not importable: {e}")
        return 0
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        out(f"SKIP nccl_bench: need 2 GPUs, found {n}")
        return 0
    nccl_ver = ".".join(map(str, torch.cuda.nccl.version())) if hasattr(torch.cuda, "nccl") else "?"
    out(f"NOTE torch {torch.__version__}, NCCL {nccl_ver}")
    rc = 0
    try:
        mp.spawn(worker, args=(free_port(),), nprocs=2, join=True)
    except Exception as e:
        out(f"FAILED nccl_spawn: {str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__}")
        rc = 1
    try:
        copy_peer()
    except Exception as e:
        out(f"FAILED torch_copy_peer: {e}")
        traceback.print_exc()
        rc = 1
    out("NOTE the NCCL 2.28 device API (ncclDevComm, LSA load/store) is a C++/CUDA "
        "interface that torch.distributed does not expose: nccl_device_bench.cu "
        "measures it (part nccl_device)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
