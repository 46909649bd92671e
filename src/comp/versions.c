/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The codec libraries built in, for --version: the bytes of an image depend
 * on them (a different zlib or libdeflate deflates differently).
 */
#include <stdio.h>

#include "comp/internal.h"
#if HAVE_GZIP
#include <zlib.h>
#endif
#if HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif
#if HAVE_XZ
#include <lzma.h>
#endif
#if HAVE_LZ4
#include <lz4.h>
#endif
#if HAVE_LZO
#include <lzo/lzoconf.h>
#endif
#if HAVE_ZSTD
#include <zstd.h>
#endif

const char *sqw_comp_versions(void)
{
	static char buf[256];
	size_t n = 0;

#define ADD(...) n += (size_t)snprintf(buf + n, n < sizeof(buf) ? sizeof(buf) - n : 0, __VA_ARGS__)
	buf[0] = '\0';
#if HAVE_GZIP
#if HAVE_LIBDEFLATE
	ADD("gzip: libdeflate %s (zlib %s for gzip,zlib)", LIBDEFLATE_VERSION_STRING, zlibVersion());
#else
	ADD("gzip: zlib %s", zlibVersion());
#endif
#endif
#if HAVE_XZ
	ADD("%sxz, lzma: liblzma %s", n ? "; " : "", lzma_version_string());
#endif
#if HAVE_LZ4
	ADD("%slz4: liblz4 %s", n ? "; " : "", LZ4_versionString());
#endif
#if HAVE_LZO
	ADD("%slzo: lzo %s", n ? "; " : "", lzo_version_string());
#endif
#if HAVE_ZSTD
	ADD("%szstd: libzstd %s", n ? "; " : "", ZSTD_versionString());
#endif
#undef ADD
	return buf;
}
