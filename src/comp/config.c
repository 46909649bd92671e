/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Compressor settings: defaults, spec parsing, options block. */
#include <stdarg.h>
#include <stdio.h>

#include "comp/internal.h"
#include "util/util.h"

#define LZ4HC_DEFAULT_LEVEL 12	/* what mksquashfs -Xhc uses */

/* Messages that quote the user's input live here (one per thread). */
static _Thread_local char msg_buf[112];

struct tok {
	const char *p;
	size_t len;
};

static const char *const gzip_strategies[] = {
	"default", "filtered", "huffman", "rle", "fixed",
};
static const char *const xz_bcj_names[] = {
	"x86", "powerpc", "ia64", "arm", "armthumb", "sparc", "arm64", "riscv",
};
static const char *const lzo_algorithms[] = {
	"lzo1x_1", "lzo1x_1_11", "lzo1x_1_12", "lzo1x_1_15", "lzo1x_999",
};
#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

__attribute__((format(printf, 1, 2)))
static const char *fmt_msg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg_buf, sizeof(msg_buf), fmt, ap);
	va_end(ap);
	return msg_buf;
}

/* Quote at most 40 bytes of a token in a message. */
#define TOKQ(t) (int)((t)->len > 40 ? 40 : (t)->len), (t)->p

static int tok_is(const struct tok *t, const char *s)
{
	return strlen(s) == t->len && memcmp(t->p, s, t->len) == 0;
}

/* Plain decimal only: no sign, no blanks, at most 9 digits. */
static int tok_uint(const struct tok *t, uint32_t *v)
{
	char *end;

	if (t->len == 0 || t->len > 9 || t->p[0] < '0' || t->p[0] > '9')
		return -1;
	*v = (uint32_t)strtoul(t->p, &end, 10);
	return end == t->p + t->len ? 0 : -1;
}

static int tok_find(const struct tok *t, const char *const *names, int n)
{
	int i;

	for (i = 0; i < n && !tok_is(t, names[i]); i++)
		;
	return i < n ? i : -1;
}

/* "a+b+c" against a name table; bit i stands for names[i]. */
static int tok_bits(const struct tok *t, const char *const *names, int n,
		    uint32_t *bits, struct tok *bad)
{
	const char *p = t->p, *end = t->p + t->len;
	int i;

	for (*bits = 0;; p++) {	/* p++ skips the '+' */
		bad->p = p;
		for (bad->len = 0; p < end && *p != '+'; p++)
			bad->len++;
		i = tok_find(bad, names, n);
		if (i < 0)
			return -1;	/* also catches empty parts */
		*bits |= 1u << i;
		if (p == end)
			return 0;
	}
}

/*
 * xz dict=SIZE: bytes with a K/M or KiB/MiB (binary) suffix, or a
 * percentage of block_size with up to 3 decimals (mksquashfs's 37.5%).
 */
static int parse_dict(const struct tok *t, uint32_t block_size, uint32_t *out)
{
	struct tok num = *t, frac = { NULL, 0 };
	uint32_t n, f = 0, mul = 1, scale = 1;
	const char *dot;
	uint64_t v;

	if (num.len > 2 && num.p[num.len - 2] == 'i' && num.p[num.len - 1] == 'B')
		num.len -= 2;	/* KiB, MiB: only after a unit */
	switch (num.len ? num.p[num.len - 1] : 0) {
	case 'K': case 'k': mul = 1u << 10; num.len--; break;
	case 'M': case 'm': mul = 1u << 20; num.len--; break;
	case '%':
		if (num.len != t->len)
			return -1;
		mul = 0;
		num.len--;
		dot = memchr(num.p, '.', num.len);
		if (dot) {
			frac.p = dot + 1;
			frac.len = num.len - (size_t)(dot + 1 - num.p);
			num.len = (size_t)(dot - num.p);
			if (frac.len > 3 || tok_uint(&frac, &f))
				return -1;
			for (size_t i = 0; i < frac.len; i++)
				scale *= 10;
		}
		break;
	default:
		if (num.len != t->len)
			return -1;	/* "iB" with no unit */
	}
	if (tok_uint(&num, &n))
		return -1;
	v = mul ? (uint64_t)n * mul :
		  (uint64_t)block_size * ((uint64_t)n * scale + f) / (100 * (uint64_t)scale);
	if (v == 0)	/* 0 would silently mean "block size" */
		return -1;
	*out = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
	return 0;
}

int sqw_comp_config_init(sqw_comp_config_t *cfg, enum sqw_comp_id id,
			 uint32_t block_size)
{
	if (!cfg || !sqw_comp_name(id))
		return -EINVAL;
	memset(cfg, 0, sizeof(*cfg));
	cfg->id = id;
	cfg->block_size = block_size;
	if (id == SQW_COMP_GZIP) {
		cfg->level = 9;
		cfg->opt.gzip.window = 15;
		cfg->opt.gzip.strategies = SQW_GZIP_DEFAULT;
	} else if (id == SQW_COMP_XZ || id == SQW_COMP_LZMA) {
		cfg->level = 6;	/* dict 0 = block size, no BCJ */
	} else if (id == SQW_COMP_LZO) {
		cfg->level = 8;
		cfg->opt.lzo.algorithm = SQW_LZO1X_999;
	} else if (id == SQW_COMP_ZSTD) {
		cfg->level = 15;
	}	/* lz4: fast mode, everything 0 */
	return sqw_comp_available(id) ? 0 : -ENOTSUP;
}

#define FAIL(msg_) do { *msg = (msg_); return -EINVAL; } while (0)

/* Keys and the codecs that know them; "extreme", "hc", "zlib" are flags. */
static const struct {
	const char *name;
	unsigned codecs;	/* 1 << id */
} comp_keys[] = {
	{ "window", 1u << SQW_COMP_GZIP }, { "strategy", 1u << SQW_COMP_GZIP },
	{ "zlib", 1u << SQW_COMP_GZIP }, { "dict", 1u << SQW_COMP_XZ },
	{ "bcj", 1u << SQW_COMP_XZ },
	{ "extreme", 1u << SQW_COMP_XZ | 1u << SQW_COMP_LZMA },
	{ "hc", 1u << SQW_COMP_LZ4 }, { "algorithm", 1u << SQW_COMP_LZO },
};

/* k's index in comp_keys, or -1 if no codec knows it. */
static int key_index(const struct tok *k)
{
	for (int i = 0; i < NELEM(comp_keys); i++)
		if (tok_is(k, comp_keys[i].name))
			return i;
	return -1;
}

static int key_known(enum sqw_comp_id id, const struct tok *k)
{
	int i = key_index(k);

	return i >= 0 && (comp_keys[i].codecs & (1u << id));
}

static int tok_is_key(const struct tok *k)
{
	return key_index(k) >= 0;
}

int sqw_comp_is_key(const char *key)
{
	struct tok k = { key, strlen(key) };

	return tok_is_key(&k);
}

static int apply_key(sqw_comp_config_t *c, const char *name,
		     const struct tok *k, const struct tok *v, const char **msg)
{
	int flag = tok_is(k, "extreme") || tok_is(k, "hc") || tok_is(k, "zlib");
	struct tok bad;
	uint32_t n;

	if (!key_known(c->id, k))
		FAIL(fmt_msg("unknown %s option '%.*s'", name, TOKQ(k)));
	if (!flag && !v)
		FAIL(fmt_msg("%s option '%.*s' needs a value", name, TOKQ(k)));
	if (flag && v)
		FAIL(fmt_msg("%s option '%.*s' takes no value", name, TOKQ(k)));
	if (tok_is(k, "window")) {
		if (tok_uint(v, &n))
			FAIL(fmt_msg("bad gzip window '%.*s'", TOKQ(v)));
		c->opt.gzip.window = n > 100 ? 100 : (uint16_t)n;
	} else if (tok_is(k, "strategy")) {
		if (tok_bits(v, gzip_strategies, NELEM(gzip_strategies), &n, &bad))
			FAIL(fmt_msg("unknown gzip strategy '%.*s'", TOKQ(&bad)));
		c->opt.gzip.strategies = (uint16_t)n;
	} else if (tok_is(k, "zlib")) {
		c->opt.gzip.zlib = 1;
	} else if (tok_is(k, "extreme")) {
		c->opt.xz.extreme = 1;
	} else if (tok_is(k, "dict")) {
		if (parse_dict(v, c->block_size, &c->opt.xz.dict_size))
			FAIL(fmt_msg("bad xz dict size '%.*s'", TOKQ(v)));
	} else if (tok_is(k, "bcj")) {
		if (tok_bits(v, xz_bcj_names, NELEM(xz_bcj_names), &n, &bad))
			FAIL(fmt_msg("unknown xz bcj filter '%.*s'", TOKQ(&bad)));
		c->opt.xz.filters = n;
	} else if (tok_is(k, "hc")) {
		c->opt.lz4.hc = 1;
		if (c->level == 0)
			c->level = LZ4HC_DEFAULT_LEVEL;
	} else {	/* algorithm */
		c->opt.lzo.algorithm = tok_find(v, lzo_algorithms,
						NELEM(lzo_algorithms));
		if (c->opt.lzo.algorithm < 0)
			FAIL(fmt_msg("unknown lzo algorithm '%.*s'", TOKQ(v)));
	}
	return 0;
}

int sqw_comp_config_parse(sqw_comp_config_t *cfg, const char *spec,
			  uint32_t block_size, const char **msg)
{
	sqw_comp_config_t tmp;
	struct tok t, v, *vp;
	const char *p = spec, *name, *dummy;
	char nbuf[8] = "";
	int id, ret, have_level = 0;
	unsigned seen = 0;
	uint32_t n;

	if (!msg)
		msg = &dummy;
	if (!cfg || !spec)
		FAIL("no compressor given");
	t.p = p;
	p += t.len = strcspn(p, ":,");
	if (t.len < sizeof(nbuf))
		memcpy(nbuf, t.p, t.len);
	id = sqw_comp_id_from_name(nbuf);
	if (id < 0)
		FAIL(fmt_msg("unknown compressor '%.*s'", TOKQ(&t)));
	name = sqw_comp_name(id);
	ret = sqw_comp_config_init(&tmp, id, block_size ? block_size : cfg->block_size);
	if (ret) {
		*msg = fmt_msg("compressor '%s' is not built in", name);
		return ret;
	}
	/*
	 * NAME[:LEVEL][{,|:}KEY[=VAL]...]: ':' works as well as ',' between
	 * keys, since FUSE's -o splits on commas (comp=xz:9:bcj=x86).
	 */
	if (*p == ':') {
		t.p = p + 1;
		t.len = strcspn(t.p, ",:");
		/* A key there (gzip:zlib, xz:extreme) leaves the default level. */
		if (!memchr(t.p, '=', t.len) &&
		    (!tok_is_key(&t) || (id == SQW_COMP_LZ4 && tok_is(&t, "hc")))) {
			p = t.p + t.len;
			have_level = 1;
			if (id == SQW_COMP_LZ4 && tok_is(&t, "hc")) {
				tmp.opt.lz4.hc = 1;
				tmp.level = LZ4HC_DEFAULT_LEVEL;
				seen |= 1u << key_index(&t);	/* lz4:hc:hc */
			} else if (tok_uint(&t, &n)) {
				FAIL(fmt_msg("bad %s level '%.*s'", name, TOKQ(&t)));
			} else {
				/* Ranges are checked by sqw_comp_config_check(). */
				tmp.level = n > 1000 ? 1000 : (int)n;
				if (id == SQW_COMP_LZ4)
					tmp.opt.lz4.hc = 1;	/* lz4:N means HC */
			}
		}
	}
	while (*p == ',' || *p == ':') {
		t.p = ++p;
		p += t.len = strcspn(p, ",:=");
		vp = NULL;
		if (*p == '=') {
			v.p = ++p;
			p += v.len = strcspn(p, ",:");
			vp = &v;
		}
		if (!vp && t.len && t.p[0] >= '0' && t.p[0] <= '9')
			FAIL(have_level ? fmt_msg("%s level given twice", name) :
			     fmt_msg("the %s level goes right after the name (%s:%.*s)",
				     name, name, TOKQ(&t)));
		if (apply_key(&tmp, name, &t, vp, msg))
			return -EINVAL;
		/* A second bcj= would replace the first: say so, not pick one. */
		if (seen & (1u << key_index(&t)))
			FAIL(fmt_msg("%s option '%.*s' given twice", name, TOKQ(&t)));
		seen |= 1u << key_index(&t);
	}
	/* Here *p == '\0': every token ran up to a separator or the end. */
	if (id == SQW_COMP_LZO && tmp.opt.lzo.algorithm != SQW_LZO1X_999) {
		if (have_level)
			FAIL("an lzo level needs algorithm lzo1x_999");
		tmp.level = 0;	/* stored as 0 for the fast algorithms */
	}
	ret = sqw_comp_config_check(&tmp, msg);
	if (ret)
		return ret;
	*cfg = tmp;
	return 0;
}

size_t sqw_comp_config_options(const sqw_comp_config_t *cfg, uint8_t *buf)
{
	uint32_t lvl = (uint32_t)cfg->level, filters = cfg->opt.xz.filters;
	uint32_t dict = cfg->opt.xz.dict_size ? cfg->opt.xz.dict_size : cfg->block_size;
	uint16_t strat = cfg->opt.gzip.strategies;
	int alg = cfg->opt.lzo.algorithm;

	switch (cfg->id) {
	case SQW_COMP_GZIP:	/* strategies 0 and DEFAULT both mean default */
		if (lvl == 9 && cfg->opt.gzip.window == 15 && strat <= SQW_GZIP_DEFAULT)
			return 0;
		put_le32(buf, lvl);
		put_le16(buf + 4, cfg->opt.gzip.window);
		/* The default alone is 0, as mksquashfs and gensquashfs write it. */
		put_le16(buf + 6, strat == SQW_GZIP_DEFAULT ? 0 : strat);
		return 8;
	case SQW_COMP_XZ:
		if (dict == cfg->block_size && filters == 0)
			return 0;
		/*
		 * The kernel's decoder takes no larger dictionary than this, and
		 * the metadata blocks are compressed with 8 KiB (without options
		 * it assumes max(block size, 8 KiB)): 4K blocks with a filter
		 * must announce 8K, or no compressed inode could be read.
		 */
		put_le32(buf, dict < SQW_COMP_META_BLOCK ? SQW_COMP_META_BLOCK : dict);
		put_le32(buf + 4, filters);
		return 8;
	case SQW_COMP_LZ4:	/* mandatory for the kernel: version 1, flags */
		put_le32(buf, 1);
		put_le32(buf + 4, cfg->opt.lz4.hc ? 1 : 0);
		return 8;
	case SQW_COMP_LZO:
		if (alg == SQW_LZO1X_999 && lvl == 8)
			return 0;
		put_le32(buf, (uint32_t)alg);
		put_le32(buf + 4, alg == SQW_LZO1X_999 ? lvl : 0);
		return 8;
	case SQW_COMP_ZSTD:
		if (lvl == 15)
			return 0;
		put_le32(buf, lvl);
		return 4;
	case SQW_COMP_LZMA:	/* never has an options block */
		break;
	}
	return 0;
}

/* Append ", WORD a+b" for the bits of set named in names (nothing if none). */
static size_t put_bits(char *buf, size_t len, size_t at, const char *word,
		       const char *const *names, int n, uint32_t set)
{
	const char *sep = ", ";

	for (int i = 0; i < n; i++) {
		if (!(set & (1u << i)))
			continue;
		at += (size_t)snprintf(buf + at, at < len ? len - at : 0, "%s%s%s",
				       sep, sep[0] == ',' ? word : "", names[i]);
		sep = "+";
	}
	return at;
}

const char *sqw_comp_config_describe(const sqw_comp_config_t *cfg, char *buf,
				     size_t len)
{
	const char *name = sqw_comp_name(cfg->id);
	int algo = cfg->opt.lzo.algorithm;
	size_t at;

	if (!name)
		name = "unknown";
	if (cfg->id == SQW_COMP_LZ4 && !cfg->opt.lz4.hc)
		at = (size_t)snprintf(buf, len, "%s", name);
	else if (cfg->id == SQW_COMP_LZ4)
		at = (size_t)snprintf(buf, len, "%s hc level %d", name, cfg->level);
	else if (cfg->id == SQW_COMP_LZO && algo != SQW_LZO1X_999 &&
		 algo >= 0 && algo < NELEM(lzo_algorithms))
		at = (size_t)snprintf(buf, len, "%s %s", name, lzo_algorithms[algo]);
	else
		at = (size_t)snprintf(buf, len, "%s level %d", name, cfg->level);
	/*
	 * Every setting that changes the bytes, when not the default: a log
	 * line then tells which settings made an image.
	 */
	if (cfg->id == SQW_COMP_GZIP) {
		if (cfg->opt.gzip.window != 15)
			at += (size_t)snprintf(buf + at, at < len ? len - at : 0,
					       ", window %u", cfg->opt.gzip.window);
		if (cfg->opt.gzip.strategies != SQW_GZIP_DEFAULT)
			at = put_bits(buf, len, at, "strategy ", gzip_strategies,
				      NELEM(gzip_strategies), cfg->opt.gzip.strategies);
		if (cfg->opt.gzip.zlib)
			at += (size_t)snprintf(buf + at, at < len ? len - at : 0, ", zlib");
	} else if (cfg->id == SQW_COMP_XZ || cfg->id == SQW_COMP_LZMA) {
		uint32_t d = cfg->opt.xz.dict_size;

		if (cfg->opt.xz.extreme)
			at += (size_t)snprintf(buf + at, at < len ? len - at : 0, " extreme");
		if (d && d != cfg->block_size)
			at += (size_t)snprintf(buf + at, at < len ? len - at : 0,
					       ", dict %u %s", d % 1024 ? d : d / 1024,
					       d % 1024 ? "bytes" : "KiB");
		if (cfg->id == SQW_COMP_XZ)
			at = put_bits(buf, len, at, "bcj ", xz_bcj_names,
				      NELEM(xz_bcj_names), cfg->opt.xz.filters);
	}
	(void)at;
	return buf;
}
