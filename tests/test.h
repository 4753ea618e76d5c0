/* test.h - the smallest possible unit-test harness.
 *
 * Each test binary prints one line per check group: "PASS name" or
 * "FAIL name: why". tests/run.sh counts them and prints the closing
 * "N passed, N failed" line. Exit status is 1 if anything failed. */
#ifndef K3_TEST_H
#define K3_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <math.h>

static int test_failures_total;
static int test_current_failed;
static const char *test_current_name;

#define TEST_BEGIN(name) do { test_current_name = (name); test_current_failed = 0; } while (0)
#define TEST_END() do { \
        if (!test_current_failed) printf("PASS %s\n", test_current_name); \
        fflush(stdout); } while (0)
/* CHECK(cond, fmt, ...) records the first failure of the current test. */
#define CHECK(cond, ...) do { if (!(cond)) { \
        if (!test_current_failed) { printf("FAIL %s: ", test_current_name); \
            printf(__VA_ARGS__); printf(" (%s:%d)\n", __FILE__, __LINE__); } \
        test_current_failed = 1; test_failures_total++; } } while (0)
#define TEST_EXIT() return test_failures_total ? 1 : 0

#endif
