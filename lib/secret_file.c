/* secret_file.c — read a credential's first line; see secret_file.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/secret_file.h"

int fg_secret_line_read(const char *path, const char *what, char *out, size_t cap, char *err,
			size_t errlen)
{
	/* room for the longest line, its line end and one byte more, so an
	 * over-long first line is told apart from one that fits */
	char buf[FG_SECRET_LINE_MAX + 3];
	struct stat sb;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0) {
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "%s %s: not a regular file", what, path);
		close(fd);
		return -1;
	}
	while (got < sizeof(buf)) {
		ssize_t n = read(fd, buf + got, sizeof(buf) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
			close(fd);
			return -1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	size_t len = 0;
	while (len < got && buf[len] != '\n')
		len++;
	if (len && buf[len - 1] == '\r')
		len--;
	while (len && (buf[len - 1] == ' ' || buf[len - 1] == '\t'))
		len--;
	if (!len) {
		snprintf(err, errlen, "%s %s: the first line is empty", what, path);
		return -1;
	}
	if (len > FG_SECRET_LINE_MAX || len >= cap) {
		snprintf(err, errlen, "%s %s: the first line is longer than %d bytes", what, path,
			 FG_SECRET_LINE_MAX);
		return -1;
	}
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)buf[i] < 0x21 || (unsigned char)buf[i] > 0x7e) {
			snprintf(err, errlen,
				 "%s %s: byte %zu of the first line is not visible ASCII (a space, a control byte or non-ASCII cannot go into a header)",
				 what, path, i + 1);
			return -1;
		}
	if (sb.st_mode & S_IROTH)
		fprintf(stderr, "fairgated: warning: %s %s is readable by every user (mode %03o)\n", what,
			path, (unsigned)(sb.st_mode & 0777));
	memcpy(out, buf, len);
	out[len] = 0;
	return (int)len;
}
