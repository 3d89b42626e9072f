/*
 * pav_mpi_allreduce: MPI smoke test for provision-and-validate.
 *
 *   pav_mpi_allreduce --out DIR --test-id NAME [--count N] [--iters K] [--inject-wrong RANK]
 *
 * Every rank names its host (gathered on rank 0), then K timed MPI_Allreduce
 * (MPI_SUM) of N ints, each rank contributing rank+1 in every element; every
 * rank checks every element against n(n+1)/2 and the wrong counts are summed
 * on rank 0. Rank 0 writes DIR/NAME.rank0.json: first at start (status
 * "error", "did not finish", so a crash is never silent), then the result.
 * The reported time is the median over iterations of the slowest rank's time.
 * --inject-wrong RANK is for tests: that rank contributes a wrong value to element 0, so the check
 * must fail. Exit code: 0 pass, 1 fail, 2 bad arguments.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCHEMA_VERSION 1
#define DEFAULT_COUNT 1048576L
#define DEFAULT_ITERS 5
#define MAX_COUNT (1L << 28)
#define MAX_ITERS 1000

struct opts {
    const char *out;
    const char *test_id;
    long count;
    long iters;
    long inject_wrong;
};

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* Returns an error message, or NULL when the arguments are good. */
static const char *parse_args(int argc, char **argv, struct opts *o)
{
    o->out = NULL;
    o->test_id = NULL;
    o->count = DEFAULT_COUNT;
    o->iters = DEFAULT_ITERS;
    o->inject_wrong = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc)
            return "every option needs a value";
        if (strcmp(a, "--out") == 0)
            o->out = argv[++i];
        else if (strcmp(a, "--test-id") == 0)
            o->test_id = argv[++i];
        else if (strcmp(a, "--count") == 0) {
            if (parse_long(argv[++i], 1, MAX_COUNT, &o->count))
                return "--count must be an integer from 1 to 268435456";
        } else if (strcmp(a, "--iters") == 0) {
            if (parse_long(argv[++i], 1, MAX_ITERS, &o->iters))
                return "--iters must be an integer from 1 to 1000";
        } else if (strcmp(a, "--inject-wrong") == 0) {
            if (parse_long(argv[++i], 0, INT_MAX, &o->inject_wrong))
                return "--inject-wrong must be a rank";
        } else
            return "unknown option";
    }
    if (!o->out || !*o->out)
        return "--out is required";
    if (!o->test_id || !*o->test_id || strchr(o->test_id, '/'))
        return "--test-id is required and must not contain '/'";
    return NULL;
}

/* mkdir -p */
static int mkdirs(const char *path)
{
    char buf[4096];
    size_t len = strlen(path);
    struct stat st;

    if (len == 0 || len >= sizeof(buf))
        return -1;
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return -1;
    return (stat(buf, &st) == 0 && S_ISDIR(st.st_mode)) ? 0 : -1;
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

struct result {
    const char *status;
    char reason[256];
    int have_metrics;
    const char *hosts; /* world_size names, MPI_MAX_PROCESSOR_NAME apart */
    long long wrong_total;
    double time_us_median;
};

/* Writes the file through a temporary name, so readers never see half of it. */
static int write_report(const struct opts *o, int world, const char *hostname, const struct result *r)
{
    char path[4096], tmp[4200];
    FILE *f;

    if (snprintf(path, sizeof(path), "%s/%s.rank0.json", o->out, o->test_id) >= (int)sizeof(path))
        return -1;
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    f = fopen(tmp, "w");
    if (!f)
        return -1;
    fprintf(f, "{\"schema_version\": %d, \"test_id\": ", SCHEMA_VERSION);
    json_string(f, o->test_id);
    fprintf(f, ", \"kind\": \"mpi\", \"rank\": 0, \"world_size\": %d, \"hostname\": ", world);
    json_string(f, hostname);
    fprintf(f, ", \"status\": \"%s\", \"reason\": ", r->status);
    json_string(f, r->reason);
    fprintf(f, ", \"params\": {\"count\": %ld, \"iters\": %ld, \"inject_wrong\": ", o->count, o->iters);
    if (o->inject_wrong >= 0)
        fprintf(f, "%ld}", o->inject_wrong);
    else
        fputs("null}", f);
    fputs(", \"metrics\": {", f);
    if (r->have_metrics) {
        fprintf(f, "\"world_size\": %d, \"hosts\": [", world);
        for (int i = 0; i < world; i++) {
            if (i)
                fputs(", ", f);
            json_string(f, r->hosts + (size_t)i * MPI_MAX_PROCESSOR_NAME);
        }
        fprintf(f, "], \"wrong_total\": %lld, \"allreduce_time_us_median\": %.3f, \"count\": %ld, \"iters\": %ld",
                r->wrong_total, r->time_us_median, o->count, o->iters);
    }
    fputs("}}\n", f);
    if (fflush(f) != 0 || ferror(f)) {
        fclose(f);
        unlink(tmp);
        return -1;
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int rank, world, namelen;
    char hostname[MPI_MAX_PROCESSOR_NAME];
    struct opts o;
    const char *err;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);

    /* Every rank parses the same argv, so all of them agree on bad input. */
    err = parse_args(argc, argv, &o);
    if (err) {
        if (rank == 0)
            fprintf(stderr,
                    "pav_mpi_allreduce: %s\nusage: pav_mpi_allreduce --out DIR --test-id NAME "
                    "[--count N] [--iters K] [--inject-wrong RANK]\n",
                    err);
        MPI_Finalize();
        return 2;
    }

    memset(hostname, 0, sizeof(hostname));
    if (MPI_Get_processor_name(hostname, &namelen) != MPI_SUCCESS || namelen <= 0)
        gethostname(hostname, sizeof(hostname) - 1);

    struct result res = {.status = "error", .reason = "did not finish"};
    int write_failed = 0;
    if (rank == 0) {
        if (mkdirs(o.out) != 0 || write_report(&o, world, hostname, &res) != 0) {
            fprintf(stderr, "pav_mpi_allreduce: cannot write to %s: %s\n", o.out, strerror(errno));
            write_failed = 1;
        }
    }
    MPI_Bcast(&write_failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (write_failed) {
        MPI_Finalize();
        return 1;
    }

    char *hosts = NULL;
    if (rank == 0)
        hosts = calloc((size_t)world, MPI_MAX_PROCESSOR_NAME);
    MPI_Gather(hostname, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
               MPI_COMM_WORLD);

    long long expected = (long long)world * (world + 1) / 2;
    int *send = malloc((size_t)o.count * sizeof(int));
    int *recv = malloc((size_t)o.count * sizeof(int));
    double *times = calloc((size_t)o.iters, sizeof(double));
    double *slowest = calloc((size_t)o.iters, sizeof(double));
    if (!send || !recv || !times || !slowest) {
        fprintf(stderr, "pav_mpi_allreduce: rank %d: out of memory for %ld ints\n", rank, o.count);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (long i = 0; i < o.count; i++)
        send[i] = rank + 1;
    if (o.inject_wrong == rank)
        send[0] = rank + 2;

    long long wrong = 0;
    if (expected > INT_MAX) {
        wrong = -1; /* the sum does not fit an int: cannot be checked */
    } else {
        /* One untimed warm-up (connection setup), then the timed iterations. */
        MPI_Allreduce(send, recv, (int)o.count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        for (long it = 0; it < o.iters; it++) {
            for (long i = 0; i < o.count; i++)
                recv[i] = -1;
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Allreduce(send, recv, (int)o.count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            times[it] = MPI_Wtime() - t0;
            for (long i = 0; i < o.count; i++)
                wrong += recv[i] != (int)expected;
        }
    }

    long long wrong_total = 0;
    MPI_Reduce(&wrong, &wrong_total, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(times, slowest, (int)o.iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    int pass = 0;
    if (rank == 0) {
        res.have_metrics = 1;
        res.hosts = hosts;
        res.wrong_total = wrong_total;
        qsort(slowest, (size_t)o.iters, sizeof(double), cmp_double);
        res.time_us_median = 1e6 * (o.iters % 2 ? slowest[o.iters / 2]
                                                : (slowest[o.iters / 2 - 1] + slowest[o.iters / 2]) / 2);
        if (expected > INT_MAX) {
            res.status = "fail";
            snprintf(res.reason, sizeof(res.reason), "world size %d too large: the sum overflows an int", world);
        } else if (wrong_total != 0) {
            res.status = "fail";
            snprintf(res.reason, sizeof(res.reason),
                     "%lld wrong elements over %d ranks x %ld iterations x %ld elements (each should be %lld)",
                     wrong_total, world, o.iters, o.count, expected);
        } else {
            res.status = "pass";
            res.reason[0] = '\0';
            pass = 1;
        }
        if (write_report(&o, world, hostname, &res) != 0) {
            fprintf(stderr, "pav_mpi_allreduce: cannot write the result to %s: %s\n", o.out, strerror(errno));
            pass = 0;
        }
        printf("pav_mpi_allreduce: %s world_size=%d count=%ld wrong_total=%lld median_us=%.1f%s%s\n",
               res.status, world, o.count, wrong_total, res.time_us_median, pass ? "" : " reason=",
               pass ? "" : res.reason);
    }
    MPI_Bcast(&pass, 1, MPI_INT, 0, MPI_COMM_WORLD);

    free(send);
    free(recv);
    free(times);
    free(slowest);
    free(hosts);
    MPI_Finalize();
    return pass ? 0 : 1;
}
