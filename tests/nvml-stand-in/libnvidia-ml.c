/*
 * An NVML stand-in for tests on machines without a GPU: the calls diskinfo, the banner and
 * validate-cuda make, with NVML's documented signatures and return codes, answered from a
 * scenario file. nvidia-ml-py loads it as it loads the real one (dlopen "libnvidia-ml.so.1",
 * found through LD_LIBRARY_PATH or the loader's cache).
 *
 * The scenario ($NVML_STAND_IN_SCENARIO) holds one setting per line; `#` starts a comment:
 *   driver 550.54.15           nvmlSystemGetDriverVersion
 *   cuda 12040                 nvmlSystemGetCudaDriverVersion
 *   init_error 18              nvmlInit fails with this code (18: LIB_RM_VERSION_MISMATCH)
 *   gpu KEY=VALUE ...          one GPU, in index order; keys:
 *     name="NVIDIA H100 80GB HBM3"  uuid=GPU-...  mem_total_mb=81559  mem_used_mb=40000
 *     power_w=300  period_ms=167 (the driver's sample period)
 *     pattern=100:0.5,0:0.5    utilisation % for seconds, repeated; phase from the Unix epoch,
 *                              so a process sleeping to whole seconds can line up with it
 *     util_error=3             utilisation calls return this (3: NOT_SUPPORTED, as under MIG)
 *     samples_error=3          nvmlDeviceGetSamples returns this (a driver keeping no samples)
 *     lost_after_s=5           every call about this GPU returns GPU_IS_LOST (15) from this
 *                              many seconds after nvmlInit in the calling process
 *     processes=python,1234    running processes: a number is a PID, `self` the calling
 *                              process, a word every process whose /proc/PID/comm is that
 *                              word (in this /proc's namespace)
 *     process_mb=2000          memory each listed process uses
 *
 * Utilisation is computed as NVML defines it: the share of time a kernel ran over the last
 * completed sample period, so a 1 s period flattens a half-second pulse.
 */
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int nvmlReturn_t;
enum {
    OK = 0,
    ERROR_UNINITIALIZED = 1,
    ERROR_INVALID_ARGUMENT = 2,
    ERROR_NOT_SUPPORTED = 3,
    ERROR_INSUFFICIENT_SIZE = 7,
    ERROR_NOT_FOUND = 6,
    ERROR_DRIVER_NOT_LOADED = 9,
    ERROR_GPU_IS_LOST = 15,
    ERROR_LIB_RM_VERSION_MISMATCH = 18,
    ERROR_UNKNOWN = 999,
};

#define MAX_GPUS 16
#define MAX_STEPS 32
#define MAX_PROCS 16
#define HISTORY 120 /* samples the driver keeps */

typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;
typedef union {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    int siVal;
    unsigned short usVal;
} nvmlValue_t;
typedef struct {
    unsigned long long timeStamp;
    nvmlValue_t sampleValue;
} nvmlSample_t;

typedef struct {
    int index;
    char name[96], uuid[96];
    double mem_total_mb, mem_used_mb, power_w, period_s, lost_after_s, process_mb;
    int util_error, samples_error, steps;
    double step_util[MAX_STEPS], step_s[MAX_STEPS];
    char processes[MAX_PROCS][32];
    int nprocs;
} gpu_t;

static gpu_t gpus[MAX_GPUS];
static int ngpus, init_error, initialised;
static char driver[64] = "550.54.15";
static int cuda_version = 12040;
static double init_at;

static double now_s(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void set_key(gpu_t *g, const char *key, const char *value) {
    if (!strcmp(key, "name")) snprintf(g->name, sizeof g->name, "%s", value);
    else if (!strcmp(key, "uuid")) snprintf(g->uuid, sizeof g->uuid, "%s", value);
    else if (!strcmp(key, "mem_total_mb")) g->mem_total_mb = atof(value);
    else if (!strcmp(key, "mem_used_mb")) g->mem_used_mb = atof(value);
    else if (!strcmp(key, "power_w")) g->power_w = atof(value);
    else if (!strcmp(key, "period_ms")) g->period_s = atof(value) / 1000.0;
    else if (!strcmp(key, "util_error")) g->util_error = atoi(value);
    else if (!strcmp(key, "samples_error")) g->samples_error = atoi(value);
    else if (!strcmp(key, "lost_after_s")) g->lost_after_s = atof(value);
    else if (!strcmp(key, "process_mb")) g->process_mb = atof(value);
    else if (!strcmp(key, "pattern")) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", value);
        g->steps = 0;
        for (char *save = NULL, *step = strtok_r(buf, ",", &save); step && g->steps < MAX_STEPS;
             step = strtok_r(NULL, ",", &save)) {
            char *colon = strchr(step, ':');
            if (!colon) continue;
            g->step_util[g->steps] = atof(step);
            g->step_s[g->steps] = atof(colon + 1);
            g->steps++;
        }
    } else if (!strcmp(key, "processes")) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", value);
        g->nprocs = 0;
        for (char *save = NULL, *p = strtok_r(buf, ",", &save); p && g->nprocs < MAX_PROCS;
             p = strtok_r(NULL, ",", &save))
            snprintf(g->processes[g->nprocs++], 32, "%s", p);
    }
}

static void parse_gpu(char *rest) {
    if (ngpus >= MAX_GPUS) return;
    gpu_t *g = &gpus[ngpus];
    memset(g, 0, sizeof *g);
    g->index = ngpus;
    snprintf(g->name, sizeof g->name, "NVIDIA Stand-in GPU");
    snprintf(g->uuid, sizeof g->uuid, "GPU-00000000-0000-4000-8000-%012d", ngpus);
    g->mem_total_mb = 81559;
    g->power_w = 70;
    g->period_s = 1.0 / 6.0;
    g->lost_after_s = -1;
    g->process_mb = 1024;
    char *p = rest;
    while (*p) {
        while (isspace((unsigned char)*p)) p++;
        if (!*p) break;
        char key[64] = "", value[512] = "";
        int k = 0, v = 0;
        while (*p && *p != '=' && !isspace((unsigned char)*p) && k < 63) key[k++] = *p++;
        if (*p == '=') {
            p++;
            if (*p == '"') {
                p++;
                while (*p && *p != '"' && v < 511) value[v++] = *p++;
                if (*p == '"') p++;
            } else {
                while (*p && !isspace((unsigned char)*p) && v < 511) value[v++] = *p++;
            }
        }
        key[k] = value[v] = 0;
        set_key(g, key, value);
    }
    ngpus++;
}

static int load_scenario(void) {
    const char *path = getenv("NVML_STAND_IN_SCENARIO");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) return ERROR_DRIVER_NOT_LOADED;
    ngpus = 0;
    init_error = 0;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char word[32];
        int used = 0;
        if (sscanf(line, " %31s %n", word, &used) != 1) continue;
        char *rest = line + used;
        rest[strcspn(rest, "\n")] = 0;
        if (!strcmp(word, "driver")) sscanf(rest, "%63s", driver);
        else if (!strcmp(word, "cuda")) cuda_version = atoi(rest);
        else if (!strcmp(word, "init_error")) init_error = atoi(rest);
        else if (!strcmp(word, "gpu")) parse_gpu(rest);
    }
    fclose(f);
    return init_error;
}

/* --- what a GPU says at a time --- */

static double busy_at(const gpu_t *g, double t) {
    double cycle = 0;
    for (int i = 0; i < g->steps; i++) cycle += g->step_s[i];
    if (g->steps == 0 || cycle <= 0) return 0;
    double phase = fmod(t, cycle);
    for (int i = 0; i < g->steps; i++) {
        if (phase < g->step_s[i]) return g->step_util[i];
        phase -= g->step_s[i];
    }
    return g->step_util[g->steps - 1];
}

/* The share of [end - period, end] a kernel ran: NVML's definition of utilisation. */
static unsigned int window_util(const gpu_t *g, double end) {
    const int n = 200;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += busy_at(g, end - g->period_s * (i + 0.5) / n);
    return (unsigned int)lround(sum / n);
}

static int check(void *handle, gpu_t **out) {
    if (!initialised) return ERROR_UNINITIALIZED;
    gpu_t *g = handle;
    if (g < gpus || g >= gpus + ngpus) return ERROR_INVALID_ARGUMENT;
    if (g->lost_after_s >= 0 && now_s(CLOCK_MONOTONIC) - init_at >= g->lost_after_s)
        return ERROR_GPU_IS_LOST;
    *out = g;
    return OK;
}

static int copy_text(char *dst, unsigned int length, const char *src) {
    if (!dst) return ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > length) return ERROR_INSUFFICIENT_SIZE;
    strcpy(dst, src);
    return OK;
}

/* --- the API --- */

const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case OK: return "Success";
    case ERROR_UNINITIALIZED: return "Uninitialized";
    case ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case ERROR_NOT_SUPPORTED: return "Not Supported";
    case ERROR_NOT_FOUND: return "Not Found";
    case ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case ERROR_GPU_IS_LOST: return "GPU is lost";
    case ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    int r = load_scenario();
    if (r != OK) return r;
    initialised++;
    init_at = now_s(CLOCK_MONOTONIC);
    return OK;
}
nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    if (!initialised) return ERROR_UNINITIALIZED;
    initialised--;
    return OK;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (!initialised) return ERROR_UNINITIALIZED;
    return copy_text(version, length, driver);
}
nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    if (!initialised) return ERROR_UNINITIALIZED;
    char text[80];
    snprintf(text, sizeof text, "12.%s", driver);
    return copy_text(version, length, text);
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
    if (!initialised) return ERROR_UNINITIALIZED;
    if (!version) return ERROR_INVALID_ARGUMENT;
    *version = cuda_version;
    return OK;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
    return nvmlSystemGetCudaDriverVersion(version);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!initialised) return ERROR_UNINITIALIZED;
    if (!count) return ERROR_INVALID_ARGUMENT;
    *count = ngpus;
    return OK;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **handle) {
    if (!initialised) return ERROR_UNINITIALIZED;
    if (!handle || index >= (unsigned int)ngpus) return ERROR_INVALID_ARGUMENT;
    *handle = &gpus[index];
    return OK;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, void **handle) {
    return nvmlDeviceGetHandleByIndex_v2(index, handle);
}

nvmlReturn_t nvmlDeviceGetIndex(void *handle, unsigned int *index) {
    gpu_t *g;
    int r = check(handle, &g);
    if (r == OK) *index = g->index;
    return r;
}
nvmlReturn_t nvmlDeviceGetMinorNumber(void *handle, unsigned int *minor) {
    return nvmlDeviceGetIndex(handle, minor);
}

nvmlReturn_t nvmlDeviceGetName(void *handle, char *name, unsigned int length) {
    gpu_t *g;
    int r = check(handle, &g);
    return r == OK ? copy_text(name, length, g->name) : r;
}
nvmlReturn_t nvmlDeviceGetUUID(void *handle, char *uuid, unsigned int length) {
    gpu_t *g;
    int r = check(handle, &g);
    return r == OK ? copy_text(uuid, length, g->uuid) : r;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(void *handle, nvmlUtilization_t *util) {
    gpu_t *g;
    int r = check(handle, &g);
    if (r != OK) return r;
    if (g->util_error) return g->util_error;
    if (!util) return ERROR_INVALID_ARGUMENT;
    double t = now_s(CLOCK_REALTIME);
    util->gpu = window_util(g, floor(t / g->period_s) * g->period_s);
    util->memory = util->gpu / 2;
    return OK;
}

nvmlReturn_t nvmlDeviceGetSamples(void *handle, int type, unsigned long long lastSeen,
                                  int *valueType, unsigned int *count, nvmlSample_t *samples) {
    gpu_t *g;
    int r = check(handle, &g);
    if (r != OK) return r;
    if (type != 1) return ERROR_NOT_SUPPORTED; /* only NVML_GPU_UTILIZATION_SAMPLES */
    if (g->util_error) return g->util_error;
    if (g->samples_error) return g->samples_error;
    if (!count || !valueType) return ERROR_INVALID_ARGUMENT;
    double t = now_s(CLOCK_REALTIME);
    long long last = (long long)floor(t / g->period_s); /* the last completed window */
    long long first = last - HISTORY + 1;
    long long seen = (long long)floor((lastSeen / 1e6) / g->period_s + 1e-6);
    if (lastSeen && seen + 1 > first) first = seen + 1;
    unsigned int n = last >= first ? (unsigned int)(last - first + 1) : 0;
    *valueType = 0; /* NVML_VALUE_TYPE_UNSIGNED_INT... reported in uiVal */
    if (n == 0) return ERROR_NOT_FOUND;
    if (!samples) {
        *count = n;
        return OK;
    }
    if (*count < n) n = *count;
    for (unsigned int i = 0; i < n; i++) {
        double end = (first + i) * g->period_s;
        samples[i].timeStamp = (unsigned long long)llround(end * 1e6);
        samples[i].sampleValue.ullVal = 0;
        samples[i].sampleValue.uiVal = window_util(g, end);
    }
    *count = n;
    return OK;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(void *handle, nvmlMemory_t *memory) {
    gpu_t *g;
    int r = check(handle, &g);
    if (r != OK) return r;
    if (!memory) return ERROR_INVALID_ARGUMENT;
    memory->total = (unsigned long long)(g->mem_total_mb * 1048576.0);
    memory->used = (unsigned long long)(g->mem_used_mb * 1048576.0);
    memory->free = memory->total - memory->used;
    return OK;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(void *handle, nvmlMemory_v2_t *memory) {
    nvmlMemory_t m;
    int r = nvmlDeviceGetMemoryInfo(handle, &m);
    if (r != OK) return r;
    memory->total = m.total;
    memory->reserved = 0;
    memory->free = m.free;
    memory->used = m.used;
    return OK;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(void *handle, unsigned int *milliwatts) {
    gpu_t *g;
    int r = check(handle, &g);
    if (r != OK) return r;
    if (!milliwatts) return ERROR_INVALID_ARGUMENT;
    *milliwatts = (unsigned int)(g->power_w * 1000);
    return OK;
}

nvmlReturn_t nvmlDeviceGetPcieThroughput(void *handle, int counter, unsigned int *value) {
    gpu_t *g;
    int r = check(handle, &g);
    if (r != OK) return r;
    if (!value || counter < 0 || counter > 1) return ERROR_INVALID_ARGUMENT;
    *value = counter == 1 ? 512000 : 2048; /* KB/s: RX (to the GPU) 500 MB/s, TX 2 MB/s */
    return OK;
}

static int pids_of(const gpu_t *g, unsigned int *pids, int max) {
    int n = 0;
    for (int i = 0; i < g->nprocs && n < max; i++) {
        const char *want = g->processes[i];
        if (!strcmp(want, "self")) {
            pids[n++] = (unsigned int)getpid();
            continue;
        }
        if (isdigit((unsigned char)want[0])) {
            pids[n++] = (unsigned int)atoi(want);
            continue;
        }
        DIR *proc = opendir("/proc");
        if (!proc) continue;
        for (struct dirent *e; (e = readdir(proc)) && n < max;) {
            if (!isdigit((unsigned char)e->d_name[0])) continue;
            char path[300], comm[64] = "";
            snprintf(path, sizeof path, "/proc/%s/comm", e->d_name);
            FILE *f = fopen(path, "r");
            if (!f) continue;
            if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
            fclose(f);
            if (!strcmp(comm, want)) pids[n++] = (unsigned int)atoi(e->d_name);
        }
        closedir(proc);
    }
    return n;
}

static nvmlReturn_t running(void *handle, unsigned int *count, nvmlProcessInfo_t *infos) {
    gpu_t *g;
    int r = check(handle, &g);
    if (r != OK) return r;
    if (!count) return ERROR_INVALID_ARGUMENT;
    unsigned int pids[64];
    int n = pids_of(g, pids, 64);
    if (n == 0) {
        *count = 0;
        return OK;
    }
    if (!infos || *count < (unsigned int)n) {
        *count = n;
        return ERROR_INSUFFICIENT_SIZE;
    }
    for (int i = 0; i < n; i++) {
        infos[i].pid = pids[i];
        infos[i].usedGpuMemory = (unsigned long long)(g->process_mb * 1048576.0);
        infos[i].gpuInstanceId = infos[i].computeInstanceId = 0xFFFFFFFF;
    }
    *count = n;
    return OK;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(void *h, unsigned int *c, nvmlProcessInfo_t *p) {
    return running(h, c, p);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(void *h, unsigned int *c, nvmlProcessInfo_t *p) {
    return running(h, c, p);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(void *h, unsigned int *c, nvmlProcessInfo_t *p) {
    gpu_t *g;
    int r = check(h, &g);
    (void)p;
    if (r == OK) *c = 0; /* compute only: a training has no graphics context */
    return r;
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(void *h, unsigned int *c, nvmlProcessInfo_t *p) {
    return nvmlDeviceGetGraphicsRunningProcesses_v3(h, c, p);
}

nvmlReturn_t nvmlDeviceGetMigMode(void *handle, unsigned int *current, unsigned int *pending) {
    gpu_t *g;
    int r = check(handle, &g);
    if (r != OK) return r;
    *current = *pending = g->util_error == ERROR_NOT_SUPPORTED;
    return OK;
}
