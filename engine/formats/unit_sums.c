/* unit_sums.c - write and check units.sum (see unit_sums.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "file_read.h"
#include "k3.h"
#include "k3_util.h"
#include "unit_sums.h"

#define SUMS_HEADER "k3-unit-sums 1"
#define SUMS_MAX_BYTES (256u << 20)

/* One unit: a byte range of one packed file, with a label for messages. */
typedef struct {
    int file;
    uint64_t offset, bytes;
    char label[48];
} unit;

/* Every unit of the packed model, in file order; *n set. */
static unit *list_units(const k3_manifest *m, int *n, k3_error *err)
{
    size_t cap = (size_t)m->n_layers * (1 + (size_t)(m->n_experts > 0 ? m->n_experts : 0)) + 2;
    unit *u = calloc(cap, sizeof *u);
    if (!u) { k3_err(err, "%s: out of memory", m->dir); return NULL; }
    int k = 0;
    for (int l = 0; l < m->n_layers; l++)
        if (m->layers[l].trunk_bytes) {
            u[k] = (unit){K3_PK_TRUNK, m->layers[l].trunk_offset, m->layers[l].trunk_bytes, ""};
            snprintf(u[k++].label, sizeof u->label, "layer %d trunk", l);
        }
    for (int l = 0; l < m->n_layers && m->page_bytes; l++)
        for (int e = 0; e < m->n_experts; e++) {
            int64_t off = k3_manifest_expert_page(m, l, e);
            if (off < 0) continue;
            u[k] = (unit){K3_PK_EXPERTS, (uint64_t)off, m->page_bytes, ""};
            snprintf(u[k++].label, sizeof u->label, "layer %d expert %d", l, e);
        }
    if (m->file_bytes[K3_PK_EMBED]) u[k++] = (unit){K3_PK_EMBED, 0, m->file_bytes[K3_PK_EMBED], "embedding"};
    if (m->file_bytes[K3_PK_HEAD]) u[k++] = (unit){K3_PK_HEAD, 0, m->file_bytes[K3_PK_HEAD], "head"};
    *n = k;
    return u;
}

/* FNV-1a 64 of bytes [offset, offset + bytes) of fd, read through buf. */
static int hash_range(int fd, uint64_t offset, uint64_t bytes, uint8_t *buf, size_t buf_len, uint64_t *h,
                      const char *path, k3_error *err)
{
    *h = K3_FNV_INIT;
    for (uint64_t done = 0; done < bytes;) {
        size_t want = bytes - done < buf_len ? (size_t)(bytes - done) : buf_len;
        ssize_t got = pread(fd, buf, want, (off_t)(offset + done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0)
            return k3_err(err, "%s: read failed at byte %" PRIu64 ": %s", path, offset + done,
                          got < 0 ? strerror(errno) : "unexpected end of file");
        *h = k3_fnv1a64(*h, buf, (size_t)got);
        done += (uint64_t)got;
    }
    return 0;
}

/* Open the four packed files (regular files only). */
static int open_files(const k3_manifest *m, int fds[K3_PK_NFILES], char paths[K3_PK_NFILES][4200], k3_error *err)
{
    for (int f = 0; f < K3_PK_NFILES; f++) fds[f] = -1;
    for (int f = 0; f < K3_PK_NFILES; f++) {
        k3_manifest_path(m, (k3_pk_file)f, paths[f], sizeof paths[f]);
        if ((fds[f] = k3_open_regular(paths[f], O_RDONLY, err)) < 0) return -1;
    }
    return 0;
}

static void close_files(int fds[K3_PK_NFILES])
{
    for (int f = 0; f < K3_PK_NFILES; f++)
        if (fds[f] >= 0) close(fds[f]);
}

/* See unit_sums.h. */
int k3_unit_sums_write(const k3_manifest *m, k3_error *err)
{
    int n = 0, fds[K3_PK_NFILES], rc = -1;
    char paths[K3_PK_NFILES][4200], out_path[4200];
    unit *u = list_units(m, &n, err);
    size_t buf_len = 4u << 20;
    uint8_t *buf = malloc(buf_len);
    k3_output out = {0};
    snprintf(out_path, sizeof out_path, "%s/" K3_UNIT_SUMS_FILE, m->dir);
    if (!u || !buf) { if (u) k3_err(err, "%s: out of memory", m->dir); goto done; }
    if (open_files(m, fds, paths, err)) goto done;
    if (k3_output_open(&out, out_path, err)) goto done;
    fprintf(out.f, SUMS_HEADER "\n");
    for (int i = 0; i < n; i++) {
        uint64_t full, head;
        uint64_t hb = u[i].bytes < K3_UNIT_SUMS_HEAD_BYTES ? u[i].bytes : K3_UNIT_SUMS_HEAD_BYTES;
        if (hash_range(fds[u[i].file], u[i].offset, u[i].bytes, buf, buf_len, &full, paths[u[i].file], err) ||
            hash_range(fds[u[i].file], u[i].offset, hb, buf, buf_len, &head, paths[u[i].file], err)) {
            k3_output_abort(&out);
            goto done;
        }
        fprintf(out.f, "%s %" PRIu64 " %" PRIu64 " %016" PRIx64 " %016" PRIx64 " %s\n", k3_pk_file_name((k3_pk_file)u[i].file),
                u[i].offset, u[i].bytes, full, head, u[i].label);
    }
    rc = k3_output_close(&out, err);
done:
    close_files(fds);
    free(buf);
    free(u);
    return rc;
}

/* Which units the load-time sample checks: every trunk run, the embedding
 * and head, and expert pages at a stride that keeps it to about 256. */
static int in_sample(const unit *u, int index, int n_pages)
{
    if (u->file != K3_PK_EXPERTS) return 1;
    int stride = n_pages > 256 ? (n_pages + 255) / 256 : 1;
    return index % stride == 0;
}

/* See unit_sums.h. */
int k3_unit_sums_check(const k3_manifest *m, int sample, k3_error *err)
{
    char sums_path[4200];
    snprintf(sums_path, sizeof sums_path, "%s/" K3_UNIT_SUMS_FILE, m->dir);
    if (access(sums_path, F_OK) != 0) return 0;      /* packed before units.sum existed */
    char *text = NULL;
    size_t len = 0;
    if (k3_read_file(sums_path, SUMS_MAX_BYTES, &text, &len, err)) return -1;
    int n = 0, fds[K3_PK_NFILES], rc = 0, page_index = 0;
    char paths[K3_PK_NFILES][4200];
    unit *u = list_units(m, &n, err);
    size_t buf_len = 4u << 20;
    uint8_t *buf = malloc(buf_len);
    if (!u || !buf) { rc = u ? k3_err(err, "%s: out of memory", m->dir) : -1; goto done; }
    if (open_files(m, fds, paths, err)) { rc = -1; goto done; }
    char *line = text, *next = strchr(line, '\n');
    if (!next || strncmp(line, SUMS_HEADER "\n", strlen(SUMS_HEADER) + 1)) {
        rc = k3_err(err, "%s: not a k3 unit checksum file (first line is not \"" SUMS_HEADER "\")", sums_path);
        goto done;
    }
    int k = 0;
    for (line = next + 1; rc == 0 && *line; line = next ? next + 1 : line + strlen(line), k++) {
        next = strchr(line, '\n');
        if (next) *next = 0;
        char name[32];
        uint64_t off, bytes, full, head;
        if (sscanf(line, "%31s %" SCNu64 " %" SCNu64 " %" SCNx64 " %" SCNx64, name, &off, &bytes, &full, &head) != 5 ||
            k >= n || strcmp(name, k3_pk_file_name((k3_pk_file)u[k].file)) || off != u[k].offset || bytes != u[k].bytes) {
            rc = k3_err(err, "%s: line %d does not describe unit %d of manifest.json (%s)", sums_path, k + 2, k,
                        k < n ? u[k].label : "past the last unit");
            break;
        }
        int is_page = u[k].file == K3_PK_EXPERTS;
        if (sample && !in_sample(&u[k], page_index, m->n_pages)) { page_index += is_page; continue; }
        page_index += is_page;
        uint64_t hb = sample ? (bytes < K3_UNIT_SUMS_HEAD_BYTES ? bytes : K3_UNIT_SUMS_HEAD_BYTES) : bytes, h;
        if (hash_range(fds[u[k].file], off, hb, buf, buf_len, &h, paths[u[k].file], err)) { rc = -1; break; }
        if (h != (sample ? head : full))
            rc = k3_err(err, "%s: %s (bytes %" PRIu64 "..%" PRIu64 ") does not match its checksum in " K3_UNIT_SUMS_FILE
                        ": the file was modified after packing", paths[u[k].file], u[k].label, off, off + bytes - 1);
    }
    if (rc == 0 && k != n)
        rc = k3_err(err, "%s: %d units listed, manifest.json has %d", sums_path, k, n);
done:
    if (u && buf) close_files(fds);
    free(buf);
    free(u);
    free(text);
    return rc;
}
