/* cgroup.h - reading the limits a container sets on this process: the
 * cgroup of every controller line of /proc/self/cgroup and each of its
 * ancestors (a parent's limit binds its children too), for cgroup v1, v2
 * and the hybrid layout. One walker for the memory limit (mem_limit.c) and
 * the CPU quota (cpu_limit.c).
 *
 * Test hook: K3_TEST_SYSFS_ROOT=DIR reads DIR/proc/self/cgroup,
 * DIR/proc/meminfo and DIR/sys/fs/cgroup/... instead of the real files
 * (tests/test_mem_limit.c builds fake v1 and v2 trees there). */
#ifndef K3_CGROUP_H
#define K3_CGROUP_H

#include <stddef.h>
#include <stdint.h>

/* path under the test root when K3_TEST_SYSFS_ROOT is set, else path. */
void k3_sys_path(char *buf, size_t len, const char *path);

/* The first unsigned number of a one-line file: 0, or -1 when the file is
 * missing or unreadable or starts with anything else ("max", "-1"). */
int k3_read_u64_file(const char *path, uint64_t *out);

/* Called for one cgroup directory: dir is the directory to read files in,
 * cg_path the cgroup's path as /proc/self/cgroup names it ("" for the
 * root), v2 1 for the unified hierarchy. */
typedef void (*k3_cgroup_dir_fn)(const char *dir, const char *cg_path, int v2, void *user);

/* fn for the process's cgroup and each ancestor up to the root: in the v2
 * hierarchy (at /sys/fs/cgroup and, hybrid, /sys/fs/cgroup/unified) and in
 * the v1 hierarchy of controller v1_controller ("memory", "cpu"), mounted at
 * any of v1_mounts (NULL-terminated). A path absent under the mount (a
 * cgroup namespace shows the container's root there) falls through to the
 * root. */
void k3_cgroup_walk(const char *v1_controller, const char *const *v1_mounts, k3_cgroup_dir_fn fn, void *user);

#endif
