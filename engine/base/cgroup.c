/* cgroup.c - see cgroup.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "k3.h"
#include "k3_util.h"
#include "cgroup.h"

void k3_sys_path(char *buf, size_t len, const char *path)
{
    const char *root = k3_test_hook_text("K3_TEST_SYSFS_ROOT");
    snprintf(buf, len, "%s%s", root && *root ? root : "", path);
}

int k3_read_u64_file(const char *path, uint64_t *out)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[64];
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!ok || line[0] < '0' || line[0] > '9') return -1;
    char *end;
    unsigned long long v = strtoull(line, &end, 10);
    if (end == line) return -1;
    *out = v;
    return 0;
}

/* The cgroup at cg_path under one mount, then each ancestor up to the root. */
static void walk_path(const char *mount, const char *cg_path, int v2, k3_cgroup_dir_fn fn, void *user)
{
    char path[4096], dir[8256], root[4096];
    snprintf(path, sizeof path, "%s", cg_path);
    k3_sys_path(root, sizeof root, mount);
    for (;;) {
        size_t n = strlen(path);
        while (n > 0 && path[n - 1] == '/') path[--n] = 0;   /* "/a/b/" -> "/a/b", "/" -> "" */
        snprintf(dir, sizeof dir, "%s%s", root, path);
        fn(dir, path, v2, user);
        if (n == 0) break;
        char *slash = strrchr(path, '/');
        if (!slash) break;
        *slash = 0;
    }
}

void k3_cgroup_walk(const char *v1_controller, const char *const *v1_mounts, k3_cgroup_dir_fn fn, void *user)
{
    char path[4096], line[4096], wanted[64];
    snprintf(wanted, sizeof wanted, ",%s,", v1_controller);
    k3_sys_path(path, sizeof path, "/proc/self/cgroup");
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        /* "hierarchy-id:controllers:path"; v2 is "0::path" */
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c1 = *c2 = 0;
        const char *ctrls = c1 + 1, *cg = c2 + 1;
        if (!strcmp(line, "0") && !*ctrls) {
            walk_path("/sys/fs/cgroup", cg, 1, fn, user);
            walk_path("/sys/fs/cgroup/unified", cg, 1, fn, user);   /* hybrid layout */
        } else {
            char list[256];
            snprintf(list, sizeof list, ",%s,", ctrls);
            if (strstr(list, wanted))
                for (int i = 0; v1_mounts[i]; i++) walk_path(v1_mounts[i], cg, 0, fn, user);
        }
    }
    if (f) fclose(f);
}
