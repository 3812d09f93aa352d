//===- gpu_runtime.cpp - launch attn kernel bundles on CUDA or HIP --------===//
//
// A C ABI over the CUDA driver API (libcuda.so.1) or the HIP module API
// (libamdhip64.so), both opened with dlopen at run time: the project builds
// and its tests run on machines with neither. The Python package loads this
// library with ctypes and drives it with the kernel manifest (entry name,
// threads, dynamic shared memory; it computes the grid and packs the
// parameters itself). Every function returns 0 on success, or an error code
// with a message in `err`.
//
// The HIP half mirrors the CUDA half call for call; it has not been run on
// AMD hardware (none is available to this project).
//
//===----------------------------------------------------------------------===//

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using Handle = void *;
using Result = int;

/// The driver entry points, resolved once per backend.
struct Driver {
  bool hip = false;
  void *lib = nullptr;
  Result (*init)(unsigned) = nullptr;
  Result (*ctxGetCurrent)(Handle *) = nullptr;
  Result (*ctxSetCurrent)(Handle) = nullptr;
  Result (*deviceGet)(int *, int) = nullptr;
  Result (*primaryCtxRetain)(Handle *, int) = nullptr;
  Result (*moduleLoadData)(Handle *, const void *) = nullptr;
  Result (*moduleUnload)(Handle) = nullptr;
  Result (*moduleGetFunction)(Handle *, Handle, const char *) = nullptr;
  Result (*funcSetAttribute)(Handle, int, int) = nullptr;
  Result (*launchKernel)(Handle, unsigned, unsigned, unsigned, unsigned,
                         unsigned, unsigned, unsigned, Handle, void **,
                         void **) = nullptr;
  Result (*getErrorString)(Result, const char **) = nullptr;
  /// cuDeviceGetAttribute (CUDA only: persistent kernels size their launch
  /// by the SM count).
  Result (*deviceGetAttribute)(int *, int, int) = nullptr;
  /// cuTensorMapEncodeTiled (CUDA 12+; optional: only TMA kernels need it).
  Result (*tensorMapEncodeTiled)(void *, int, unsigned, void *,
                                 const unsigned long long *,
                                 const unsigned long long *, const unsigned *,
                                 const unsigned *, int, int, int,
                                 int) = nullptr;
  /// Streams and events, for a side stream beside the caller's (attn_rt_fork;
  /// optional: without them every launch goes to the caller's stream).
  Result (*streamPriorityRange)(int *, int *) = nullptr;
  Result (*streamCreateWithPriority)(Handle *, unsigned, int) = nullptr;
  Result (*eventCreate)(Handle *, unsigned) = nullptr;
  Result (*eventRecord)(Handle, Handle) = nullptr;
  Result (*streamWaitEvent)(Handle, Handle, unsigned) = nullptr;
  /// Resident blocks an SM of a kernel at a footprint (optional).
  Result (*occupancy)(int *, Handle, int, size_t) = nullptr;
};

Driver cudaDriver, hipDriver;

void setError(char *err, int len, const std::string &msg) {
  if (err && len > 0)
    std::snprintf(err, static_cast<size_t>(len), "%s", msg.c_str());
}

std::string describe(Driver &d, Result r, const char *what) {
  const char *text = nullptr;
  if (d.getErrorString)
    d.getErrorString(r, &text);
  return std::string(what) + " failed with error " + std::to_string(r) +
         (text ? std::string(" (") + text + ")" : std::string());
}

const char *missingEntry = nullptr;

template <typename Fn> bool resolve(void *lib, Fn &fn, const char *name) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn && !missingEntry)
    missingEntry = name;
  return fn != nullptr;
}

Driver *open(int backend, char *err, int len) {
  Driver &d = backend == 1 ? hipDriver : cudaDriver;
  if (d.lib)
    return &d;
  d.hip = backend == 1;
  const char *names[] = {d.hip ? "libamdhip64.so" : "libcuda.so.1",
                         d.hip ? "libamdhip64.so.6" : "libcuda.so"};
  for (const char *n : names)
    if (!d.lib)
      d.lib = dlopen(n, RTLD_NOW | RTLD_LOCAL);
  if (!d.lib) {
    setError(err, len,
             std::string("cannot load the ") + (d.hip ? "HIP" : "CUDA") +
                 " driver library (" + names[0] + "): " + dlerror());
    return nullptr;
  }
  bool ok = true;
  // The HIP driver API mirrors CUDA's entry points under other names.
  auto entry = [&](auto &fn, const char *cuda, const char *hip) {
    ok &= resolve(d.lib, fn, d.hip ? hip : cuda);
  };
  entry(d.init, "cuInit", "hipInit");
  entry(d.ctxGetCurrent, "cuCtxGetCurrent", "hipCtxGetCurrent");
  entry(d.ctxSetCurrent, "cuCtxSetCurrent", "hipCtxSetCurrent");
  entry(d.deviceGet, "cuDeviceGet", "hipDeviceGet");
  entry(d.primaryCtxRetain, "cuDevicePrimaryCtxRetain",
        "hipDevicePrimaryCtxRetain");
  entry(d.moduleLoadData, "cuModuleLoadData", "hipModuleLoadData");
  entry(d.moduleUnload, "cuModuleUnload", "hipModuleUnload");
  entry(d.moduleGetFunction, "cuModuleGetFunction", "hipModuleGetFunction");
  entry(d.funcSetAttribute, "cuFuncSetAttribute", "hipFuncSetAttribute");
  entry(d.launchKernel, "cuLaunchKernel", "hipModuleLaunchKernel");
  d.getErrorString = reinterpret_cast<decltype(d.getErrorString)>(
      dlsym(d.lib, d.hip ? "hipDrvGetErrorString" : "cuGetErrorString"));
  if (!d.hip)
    d.deviceGetAttribute = reinterpret_cast<decltype(d.deviceGetAttribute)>(
        dlsym(d.lib, "cuDeviceGetAttribute"));
  if (!d.hip)
    d.tensorMapEncodeTiled = reinterpret_cast<decltype(d.tensorMapEncodeTiled)>(
        dlsym(d.lib, "cuTensorMapEncodeTiled"));
  auto optional = [&](auto &fn, const char *cuda, const char *hip) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
        dlsym(d.lib, d.hip ? hip : cuda));
  };
  optional(d.streamPriorityRange, "cuCtxGetStreamPriorityRange",
           "hipDeviceGetStreamPriorityRange");
  optional(d.streamCreateWithPriority, "cuStreamCreateWithPriority",
           "hipStreamCreateWithPriority");
  optional(d.eventCreate, "cuEventCreate", "hipEventCreateWithFlags");
  optional(d.eventRecord, "cuEventRecord", "hipEventRecord");
  optional(d.streamWaitEvent, "cuStreamWaitEvent", "hipStreamWaitEvent");
  optional(d.occupancy, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
           "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor");
  if (!ok) {
    setError(err, len,
             std::string("the driver library lacks ") +
                 (missingEntry ? missingEntry : "an entry point"));
    dlclose(d.lib);
    d.lib = nullptr;
    return nullptr;
  }
  Result r = d.init(0);
  if (r != 0) {
    setError(err, len, describe(d, r, "driver initialization"));
    dlclose(d.lib);
    d.lib = nullptr;
    return nullptr;
  }
  return &d;
}

/// Makes sure the calling thread has a context: the framework's (PyTorch
/// makes the device's primary context current), or the primary context of
/// `device`.
bool ensureContext(Driver &d, int device, char *err, int len) {
  Handle ctx = nullptr;
  Result r = d.ctxGetCurrent(&ctx);
  if (r == 0 && ctx)
    return true;
  int dev = 0;
  if ((r = d.deviceGet(&dev, device)) != 0 ||
      (r = d.primaryCtxRetain(&ctx, dev)) != 0 ||
      (r = d.ctxSetCurrent(ctx)) != 0) {
    setError(err, len, describe(d, r, "context setup"));
    return false;
  }
  return true;
}

/// A side stream of the calling thread in one context (attn_rt_fork), with
/// the events that order it after the caller's stream and the caller's
/// stream after it. One a thread: a graph captured in one thread never takes
/// in another thread's launches. Kept for the thread's life.
struct SideStream {
  bool hip;
  Handle context;
  int high;
  Handle stream, forked, joined;
};

thread_local std::vector<SideStream> sideStreams;

SideStream *sideStream(Driver &d, int high) {
  if (!d.streamPriorityRange || !d.streamCreateWithPriority || !d.eventCreate ||
      !d.eventRecord || !d.streamWaitEvent)
    return nullptr;
  Handle ctx = nullptr;
  if (d.ctxGetCurrent(&ctx) != 0 || !ctx)
    return nullptr;
  SideStream *s = nullptr;
  for (SideStream &candidate : sideStreams)
    if (candidate.hip == d.hip && candidate.context == ctx &&
        candidate.high == high)
      s = &candidate;
  if (!s) {
    sideStreams.push_back({d.hip, ctx, high, nullptr, nullptr, nullptr});
    s = &sideStreams.back();
  }
  // Each handle is created once; one the driver refuses (e.g. under a
  // global stream capture) is asked for again on the next call, and until
  // then the caller's stream serves alone. Non-blocking: the side stream
  // waits on the caller's stream through `forked` only, not on the legacy
  // default stream. Events without timing (flag 2 in both APIs).
  constexpr unsigned kNonBlocking = 1, kDisableTiming = 2;
  if (!s->forked && d.eventCreate(&s->forked, kDisableTiming) != 0)
    s->forked = nullptr;
  if (!s->joined && d.eventCreate(&s->joined, kDisableTiming) != 0)
    s->joined = nullptr;
  int least = 0, greatest = 0;
  if (!s->stream && (d.streamPriorityRange(&least, &greatest) != 0 ||
                     d.streamCreateWithPriority(&s->stream, kNonBlocking,
                                                high ? greatest : least) != 0))
    s->stream = nullptr;
  return s->forked && s->joined && s->stream ? s : nullptr;
}

} // namespace

extern "C" {

/// Forks the calling thread's side stream of the current context off
/// `stream`: the side stream waits for the work queued on `stream` so far,
/// and *side receives it (high: at the device's greatest priority, else its
/// least). Under stream capture the side stream joins the capture. Returns
/// 0; 10 where there is no side stream (no stream API in the driver, no
/// current context, or its creation refused; nothing done: the caller
/// launches on `stream` alone); else an error.
int attn_rt_fork(int backend, void *stream, int high, void **side, char *err,
                 int len) {
  Driver *d = open(backend, err, len);
  if (!d)
    return 1;
  SideStream *s = sideStream(*d, high ? 1 : 0);
  if (!s)
    return 10;
  Result r = d->eventRecord(s->forked, stream);
  if (r == 0)
    r = d->streamWaitEvent(s->stream, s->forked, 0);
  if (r != 0) {
    setError(err, len, describe(*d, r, "the side stream's fork"));
    return 12;
  }
  *side = s->stream;
  return 0;
}

/// Joins a side stream that attn_rt_fork returned: `stream` waits for the
/// work queued on `side` so far.
int attn_rt_join(int backend, void *stream, void *side, char *err, int len) {
  Driver *d = open(backend, err, len);
  if (!d)
    return 1;
  for (SideStream &s : sideStreams)
    if (s.stream == side && s.hip == d->hip) {
      Result r = d->eventRecord(s.joined, side);
      if (r == 0)
        r = d->streamWaitEvent(stream, s.joined, 0);
      if (r != 0) {
        setError(err, len, describe(*d, r, "the side stream's join"));
        return 13;
      }
      return 0;
    }
  setError(err, len, "attn_rt_join: not a side stream of this thread");
  return 14;
}

/// Loads a module image (cubin, PTX or HSACO) for `backend` (0 CUDA, 1 HIP)
/// and returns the function `name` with its dynamic shared memory limit
/// raised to `sharedBytes`.
int attn_rt_load(int backend, int device, const void *image, const char *name,
                 int sharedBytes, void **function, void **module, char *err,
                 int len) {
  Driver *d = open(backend, err, len);
  if (!d || !ensureContext(*d, device, err, len))
    return 1;
  Handle mod = nullptr, fn = nullptr;
  Result r = d->moduleLoadData(&mod, image);
  if (r != 0) {
    setError(err, len, describe(*d, r, "module load"));
    return 2;
  }
  r = d->moduleGetFunction(&fn, mod, name);
  if (r != 0) {
    setError(
        err, len,
        describe(*d, r, (std::string("lookup of kernel ") + name).c_str()));
    d->moduleUnload(mod);
    return 3;
  }
  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8 (HIP: same value).
  if (sharedBytes > 48 * 1024 &&
      (r = d->funcSetAttribute(fn, 8, sharedBytes)) != 0) {
    setError(err, len,
             describe(*d, r, "raising the dynamic shared memory limit"));
    d->moduleUnload(mod);
    return 4;
  }
  *function = fn;
  *module = mod;
  return 0;
}

/// Launches `function` on `stream` (0: the default stream); `params` points
/// to one pointer per kernel parameter, as cuLaunchKernel takes them.
int attn_rt_launch(int backend, void *function, unsigned gx, unsigned gy,
                   unsigned gz, unsigned threads, unsigned sharedBytes,
                   void *stream, void **params, char *err, int len) {
  Driver *d = open(backend, err, len);
  if (!d)
    return 1;
  if (gx == 0 || gy == 0 || gz == 0)
    return 0; // an empty grid launches nothing
  Result r = d->launchKernel(function, gx, gy, gz, threads, 1, 1, sharedBytes,
                             stream, params, nullptr);
  if (r != 0) {
    setError(err, len, describe(*d, r, "kernel launch"));
    return 5;
  }
  return 0;
}

/// A launch of a replayed call (attn_mlir._replay): the kernel, its grid and
/// block (gx, gy, gz, threads, shared bytes), its parameter pointers and
/// words, and which words take which of the call's operand pointers: a
/// memref's allocated and aligned pointer, words[at] and words[at + 1], for
/// each pair (at, pointer) of `patches`.
struct AttnReplayLaunch {
  void *function;
  unsigned dims[5];
  void **params;
  unsigned long long *words;
  const int *patches;
  int patchCount;
};

/// What a replayed call does with its arguments' pointers. Operand pointer i
/// is bases[spec[2i]] + spec[2i + 1] (inside an argument, at a fixed offset),
/// or spec[2i + 1] where spec[2i] is -1 (a buffer of attn_mlir's own). The
/// checks: pointer aligned[2j] a multiple of aligned[2j + 1] bytes; no pair
/// (o, o_bytes, i, i_bytes) of `pairs` overlapping (an output and an operand
/// from another argument). `scratch` holds `count` pointers.
struct AttnReplayPlan {
  const long long *spec;
  int count;
  const long long *aligned;
  int alignedCount;
  const long long *pairs;
  int pairCount;
  unsigned long long *scratch;
  const AttnReplayLaunch *launches;
  int launchCount;
};

/// The operand pointers of a replayed call into plan->scratch, from its
/// arguments' base pointers: 1 when they pass the plan's checks, else 0 (the
/// call then takes the full path, which names the problem). No driver.
int attn_rt_replay_pointers(const unsigned long long *bases,
                            const AttnReplayPlan *plan) {
  unsigned long long *ptrs = plan->scratch;
  for (int i = 0; i < plan->count; ++i) {
    const long long base = plan->spec[2 * i], offset = plan->spec[2 * i + 1];
    ptrs[i] = base < 0 ? static_cast<unsigned long long>(offset)
                       : bases[base] + static_cast<unsigned long long>(offset);
  }
  for (int i = 0; i < plan->alignedCount; ++i)
    if (ptrs[plan->aligned[2 * i]] %
        static_cast<unsigned long long>(plan->aligned[2 * i + 1]))
      return 0;
  for (int i = 0; i < plan->pairCount; ++i) {
    const long long *p = plan->pairs + 4 * i;
    const unsigned long long out = ptrs[p[0]], other = ptrs[p[2]];
    if (other < out + p[1] && other + p[3] > out)
      return 0;
  }
  return 1;
}

/// A replayed call in one round trip from Python: its pointers and checks
/// (attn_rt_replay_pointers), then every launch with its pointers patched
/// in. Returns -1 where a check fails (nothing launched), else 0 or
/// attn_rt_launch's error codes.
int attn_rt_replay(int backend, void *stream, const unsigned long long *bases,
                   const AttnReplayPlan *plan, char *err, int len) {
  if (!attn_rt_replay_pointers(bases, plan))
    return -1;
  const unsigned long long *ptrs = plan->scratch;
  for (int l = 0; l < plan->launchCount; ++l) {
    const AttnReplayLaunch &launch = plan->launches[l];
    for (int i = 0; i < launch.patchCount; ++i) {
      const int at = launch.patches[2 * i];
      launch.words[at] = launch.words[at + 1] = ptrs[launch.patches[2 * i + 1]];
    }
    if (int rc =
            attn_rt_launch(backend, launch.function, launch.dims[0],
                           launch.dims[1], launch.dims[2], launch.dims[3],
                           launch.dims[4], stream, launch.params, err, len))
      return rc;
  }
  return 0;
}

/// Encodes the tiled tensor map (CUtensorMap, 128 bytes, into `out`) of a
/// `rank`-dim tensor at `base` with element type `dtype` (CUtensorMapDataType)
/// and dims `dims`, innermost first; `strides` are the byte strides of dims
/// 1 .. rank - 1 (dim 0 is contiguous). Boxes of `box` elements land in
/// shared memory with 128-byte swizzle (CU_TENSOR_MAP_SWIZZLE_128B), reads
/// outside the tensor as zeros, with 256-byte L2 promotion.
int attn_rt_encode_tensor_map(int dtype, int rank, void *base,
                              const unsigned long long *dims,
                              const unsigned long long *strides,
                              const unsigned *box, void *out, char *err,
                              int len) {
  Driver *d = open(0, err, len);
  if (!d)
    return 1;
  if (!d->tensorMapEncodeTiled) {
    setError(err, len,
             "the CUDA driver has no cuTensorMapEncodeTiled (TMA kernels "
             "need a CUDA 12 driver)");
    return 6;
  }
  const unsigned elementStrides[5] = {1, 1, 1, 1, 1};
  constexpr int kInterleaveNone = 0, kSwizzle128B = 3, kL2Promotion256B = 3,
                kOobFillNone = 0;
  Result r = d->tensorMapEncodeTiled(out, dtype, static_cast<unsigned>(rank),
                                     base, dims, strides, box, elementStrides,
                                     kInterleaveNone, kSwizzle128B,
                                     kL2Promotion256B, kOobFillNone);
  if (r != 0) {
    setError(err, len, describe(*d, r, "cuTensorMapEncodeTiled"));
    return 7;
  }
  return 0;
}

/// The multiprocessor (SM) count of CUDA device `device` into `count`.
int attn_rt_multiprocessors(int backend, int device, int *count, char *err,
                            int len) {
  Driver *d = open(backend, err, len);
  if (!d)
    return 1;
  if (!d->deviceGetAttribute) {
    setError(err, len,
             "the driver has no cuDeviceGetAttribute (persistent kernels are "
             "CUDA kernels)");
    return 8;
  }
  int dev = 0;
  Result r = d->deviceGet(&dev, device);
  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16.
  if (r == 0)
    r = d->deviceGetAttribute(count, 16, dev);
  if (r != 0) {
    setError(err, len, describe(*d, r, "the SM count query"));
    return 9;
  }
  return 0;
}

/// The blocks of `threads` threads and `sharedBytes` of dynamic shared
/// memory that one SM holds at once for `function` (into *blocks): what a
/// launch's footprint gives its grid (attn_mlir._gpu.Kernel). Returns 0;
/// 10 where the driver has no occupancy query; else an error.
int attn_rt_occupancy(int backend, void *function, int threads, int sharedBytes,
                      int *blocks, char *err, int len) {
  Driver *d = open(backend, err, len);
  if (!d)
    return 1;
  if (!d->occupancy)
    return 10;
  Result r =
      d->occupancy(blocks, function, threads, static_cast<size_t>(sharedBytes));
  if (r != 0) {
    setError(err, len, describe(*d, r, "the occupancy query"));
    return 15;
  }
  return 0;
}

/// 1 when the backend's driver library can be loaded and initialized.
int attn_rt_available(int backend, char *err, int len) {
  return open(backend, err, len) ? 1 : 0;
}

} // extern "C"
