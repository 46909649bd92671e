/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Writer options by key, shared by sqfs-pack's flags and FUSE -o options. */
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

int cli_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	}
	if (v > (ULLONG_MAX >> shift))
		return -EINVAL;	/* would wrap: 18014398509481988K is not 4K */
	v <<= shift;
	/* 128K, 128KB, 128KiB, 4096, 4096B: "i" only after a unit, as in KiB */
	if (shift && end[0] == 'i' && end[1] == 'B')
		end += 2;
	else if (*end == 'B')
		end++;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

int cli_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_time(const char *s, int64_t *out)
{
	uint64_t v;

	if (s && !strcmp(s, "now")) {
		*out = (int64_t)time(NULL);
		return 0;
	}
	if (s && *s == '@')
		s++;
	if (cli_parse_u64(s, UINT32_MAX, &v))
		return -EINVAL;
	*out = (int64_t)v;
	return 0;
}

int cli_parse_id(const char *s, int is_group, int64_t *out)
{
	uint64_t v;

	if (!cli_parse_u64(s, UINT32_MAX - 1, &v)) {
		*out = (int64_t)v;
		return 0;
	}
	if (!s)
		return -EINVAL;
	if (is_group) {
		struct group *g = getgrnam(s);

		if (!g)
			return -EINVAL;
		*out = g->gr_gid;
	} else {
		struct passwd *p = getpwnam(s);

		if (!p)
			return -EINVAL;
		*out = p->pw_uid;
	}
	return 0;
}

void cli_opts_init(struct cli_opts *o)
{
	memset(o, 0, sizeof(*o));
	sqw_image_opts_init(&o->img);
	o->block_size = 128 * 1024;
	o->progress = -1;
	snprintf(o->comp_spec, sizeof(o->comp_spec), "zstd");
	o->prefix = "--";
	o->img.mkfs_time = (uint32_t)time(NULL);
}

struct flag_opt {
	const char *key;
	unsigned flag;
};

static const struct flag_opt flags[] = {
	{ "no_fragments", SQW_OPT_NO_FRAGMENTS },
	{ "always_fragments", SQW_OPT_ALWAYS_FRAGMENTS },
	{ "no_dedup", SQW_OPT_NO_DEDUP },
	{ "no_duplicates", SQW_OPT_NO_DEDUP },
	{ "no_exports", SQW_OPT_NO_EXPORTS },
	{ "no_xattrs", SQW_OPT_NO_XATTRS },
	{ "no_pad", SQW_OPT_NO_PAD },
	{ "no_sparse", SQW_OPT_NO_SPARSE },
	{ "all_root", SQW_OPT_ALL_ROOT },
};

#define BAD(...) do { snprintf(msg, msglen, __VA_ARGS__); return -EINVAL; } while (0)

int cli_opt_set(struct cli_opts *o, const char *name, const char *val,
		char *msg, size_t msglen)
{
	char key[32];
	uint64_t v;
	int64_t t;
	size_t i;

	/* "block-size" (command line) and "block_size" (-o) are one key; */
	/* messages keep the spelling the user typed. */
	for (i = 0; name[i] && i < sizeof(key) - 1; i++)
		key[i] = name[i] == '-' ? '_' : name[i];
	key[i] = '\0';

	for (i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		if (strcmp(key, flags[i].key))
			continue;
		if (val)
			BAD("option '%s' takes no value", name);
		o->img.flags |= flags[i].flag;
		return 0;
	}
	if (!strcmp(key, "serial")) {
		if (val)	/* serial=0 would turn it on */
			BAD("option '%s' takes no value", name);
		o->img.jobs = 0;
		return 0;
	}
	if (!val)
		val = "";
	if (!strcmp(key, "comp")) {
		/* ':' before settings works on the command line and in -o */
		if (!*val)
			BAD("%s: give a compressor as NAME[:LEVEL][:KEY[=VALUE]...]", name);
		if (strlen(val) >= sizeof(o->comp_spec))
			BAD("%s: %zu characters, more than any compressor and its settings "
			    "take (%zu)", name, strlen(val), sizeof(o->comp_spec) - 1);
		snprintf(o->comp_spec, sizeof(o->comp_spec), "%s", val);
	} else if (!strcmp(key, "block_size")) {
		if (cli_parse_size(val, &v) || v < 4096 || v > (1u << 20) ||
		    (v & (v - 1)))
			BAD("%s '%s': must be a power of two from 4K to 1M", name, val);
		o->block_size = (uint32_t)v;
	} else if (!strcmp(key, "jobs")) {
		if (cli_parse_u64(val, 1024, &v) || v == 0)
			BAD("%s '%s': must be a number from 1 to 1024", name, val);
		o->img.jobs = (unsigned)v;
	} else if (!strcmp(key, "queue")) {
		/* each block in flight costs two buffers, whatever the input */
		if (cli_parse_u64(val, 65536, &v) || v < 2)
			BAD("%s '%s': must be a number of blocks from 2 to 65536", name, val);
		o->img.queue = (unsigned)v;
	} else if (!strcmp(key, "mkfs_time")) {
		if (parse_time(val, &t))
			BAD("%s '%s': give seconds since 1970 (0..4294967295) or 'now'", name, val);
		o->img.mkfs_time = (uint32_t)t;
		o->mkfs_time_set = 1;
	} else if (!strcmp(key, "all_time")) {
		if (parse_time(val, &t))
			BAD("%s '%s': give seconds since 1970 (0..4294967295) or 'now'", name, val);
		o->img.all_time = t;
	} else if (!strcmp(key, "force_uid")) {
		if (cli_parse_id(val, 0, &o->img.force_uid))
			BAD("%s '%s': not a uid or user name", name, val);
	} else if (!strcmp(key, "force_gid")) {
		if (cli_parse_id(val, 1, &o->img.force_gid))
			BAD("%s '%s': not a gid or group name", name, val);
	} else {
		return 1;
	}
	return 0;
}

int cli_opts_finish(struct cli_opts *o, char *msg, size_t msglen)
{
	const char *sde = getenv("SOURCE_DATE_EPOCH"), *err = NULL;
	int64_t t;
	int ret;

	/* Read only when it is used: a mkfs time given wins over it. */
	if (!o->mkfs_time_set && sde && *sde) {
		/* The specification's decimal integer: no "now", no "@" */
		if (*sde == '@' || parse_time(sde, &t) || !strcmp(sde, "now"))
			BAD("SOURCE_DATE_EPOCH='%s': give seconds since 1970 (0..4294967295)", sde);
		o->img.mkfs_time = (uint32_t)t;
	}
	if ((o->img.flags & SQW_OPT_NO_FRAGMENTS) &&
	    (o->img.flags & SQW_OPT_ALWAYS_FRAGMENTS))
		BAD("--no-fragments (no_fragments) and --always-fragments (always_fragments) cannot be combined");
	ret = sqw_comp_config_parse(&o->img.comp, o->comp_spec, o->block_size, &err);
	if (ret == -ENOTSUP)
		BAD("%scomp '%s': %s", o->prefix, o->comp_spec,
		    err ? err : "compressor not built in");
	if (ret)
		BAD("%scomp '%s': %s", o->prefix, o->comp_spec, err ? err : "invalid");
	o->img.comp.block_size = o->block_size;
	return 0;
}
