/* Helpers shared by the C baselines: sorting doubles and parsing sizes
 * such as 4K, 64M, 1G (powers of 1024). */
#ifndef HCOMM_BENCH_UTIL_H
#define HCOMM_BENCH_UTIL_H

#include <stdlib.h>

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*end == 'K' || *end == 'k') v *= 1024;
    else if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
    else if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
    return (size_t)v;
}

#endif
