#include "model/io/files.h"

#include <algorithm>
#include <cctype>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <unordered_set>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "model/text/utf8.h"  // IsHiddenControl (inline: model_io does not link model_utf8)

namespace model {
namespace {

// What a path is, in a message: "a folder", "a FIFO", "a device".
std::string KindOf(const struct stat& st) {
    if (S_ISDIR(st.st_mode)) return "a folder";
    if (S_ISFIFO(st.st_mode)) return "a FIFO";
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "a device";
    if (S_ISSOCK(st.st_mode)) return "a socket";
    return "not a regular file";
}

// Walks the JSON once without building it and stops at the first value nested deeper than the
// limit (nlohmann's parser itself is iterative, but a deep value is a hazard to whatever walks it)
// or past the memory its tree may take, `max_tree` bytes as nlohmann holds it: a value 16 bytes
// and as much again for its container's spare room, an object's map or an array's vector and a
// string's heap on top, an object's key in a map node of about 80 bytes.
// Given `duplicates`, it also names (dotted: "view.layer") each key an object gives more than once,
// which the parser would settle silently by taking the last.
class DepthCheck final : public nlohmann::json_sax<nlohmann::json> {
public:
    DepthCheck(std::vector<std::string>* duplicates, size_t max_tree) : m_duplicates(duplicates), m_max_tree(max_tree) {}
    std::string error;
    size_t tree = 0;  // the bytes counted so far
    bool null() override { return Value(0); }
    bool boolean(bool) override { return Value(0); }
    bool number_integer(number_integer_t) override { return Value(0); }
    bool number_unsigned(number_unsigned_t) override { return Value(0); }
    bool number_float(number_float_t, const string_t&) override { return Value(0); }
    bool string(string_t& s) override { return Value(48 + Heap(s)); }
    bool binary(binary_t&) override { return Value(48); }
    bool start_object(std::size_t) override { return Value(64) && Enter(); }
    bool key(string_t& key) override {
        if (!Value(80 + Heap(key))) return false;
        if (!m_duplicates) return true;
        Level& level = m_levels.back();
        if (!level.keys.insert(key).second && m_duplicates->size() < kMaxDuplicatesNamed) {
            // Named as a message shows it, cut as it is built (a session of 1 MB keys copied every
            // enclosing one whole for each duplicate).
            std::string name;
            for (const Level& l : m_levels)
                if (&l != &level && !l.last_key.empty() && name.size() < kMaxNameBytes) name += l.last_key.substr(0, kMaxNameBytes) + ".";
            name += key.substr(0, kMaxNameBytes);
            if (name.size() > kMaxNameBytes) name = name.substr(0, kMaxNameBytes) + "...";
            m_duplicates->push_back(std::move(name));
        }
        level.last_key = key.substr(0, kMaxNameBytes + 1);
        return true;
    }
    bool end_object() override { return Leave(); }
    bool start_array(std::size_t) override { return Value(40) && Enter(); }
    bool end_array() override { return Leave(); }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
        error = JsonErrorText(e);
        return false;
    }

private:
    static constexpr size_t kMaxDuplicatesNamed = 20, kMaxNameBytes = 120;
    // A string's heap: none within the short-string buffer, else its bytes and the allocation's.
    static size_t Heap(const string_t& s) { return s.size() > 15 ? s.size() + 17 : 0; }
    bool Value(size_t extra) {
        tree += 32 + extra;
        if (tree <= m_max_tree) return true;
        error = "holding it would take more than " + FormatBytes(m_max_tree) + " of memory, more than a JSON text of its size needs";
        return false;
    }
    struct Level {
        std::unordered_set<std::string> keys;
        std::string last_key;  // empty in an array: its items are named by the array's key
    };
    bool Enter() {
        if (++m_depth > kMaxJsonDepth) {
            error = "nested more than " + std::to_string(kMaxJsonDepth) + " levels deep";
            return false;
        }
        if (m_duplicates) m_levels.emplace_back();
        return true;
    }
    bool Leave() {
        --m_depth;
        if (m_duplicates) m_levels.pop_back();
        return true;
    }
    std::vector<std::string>* m_duplicates;
    size_t m_max_tree;
    std::vector<Level> m_levels;
    int m_depth = 0;
};

// A quarter of the machine's memory (where it cannot be read, 4 GB).
size_t QuarterOfMemory() {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<size_t>(pages) / 4 * static_cast<size_t>(page) : size_t{4} << 30;
}

}  // namespace

std::string FormatBytes(size_t bytes) {
    char buf[32];
    if (bytes < 1000) std::snprintf(buf, sizeof buf, "%zu bytes", bytes);
    else if (bytes < 1000 * 1000) std::snprintf(buf, sizeof buf, "%.1f kB", bytes / 1e3);
    else if (bytes < size_t{1000} * 1000 * 1000) std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
    else if (bytes < size_t{1000} * 1000 * 1000 * 1000) std::snprintf(buf, sizeof buf, "%.1f GB", bytes / 1e9);
    else if (bytes < size_t{1000} * 1000 * 1000 * 1000 * 1000) std::snprintf(buf, sizeof buf, "%.1f TB", bytes / 1e12);
    else std::snprintf(buf, sizeof buf, "%.1f PB", bytes / 1e15);
    return buf;
}

std::string WhyNotThere(int error) {
    switch (error) {
        case ENOENT: return " does not exist";
        case ENOTDIR: return " does not exist (a part of its path is a file)";
        case ELOOP: return " is a loop of symbolic links";
        default: return std::string(": cannot read it (") + std::strerror(error) + ")";
    }
}

Status CheckRegularFile(const std::string& path, size_t max_bytes) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
        const int error = errno;
        if (error == ENOENT && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
            return Fail(Quoted(path) + " is a symbolic link to nothing (what it names does not exist)");
        return Fail(Quoted(path) + WhyNotThere(error));
    }
    if (!S_ISREG(st.st_mode)) return Fail(Quoted(path) + " is " + KindOf(st) + ", not a file");
    if (static_cast<uint64_t>(st.st_size) > max_bytes) {
        // In bytes where the rounded sizes read the same ("1.1 GB, more than the 1.1 GB").
        const bool same = FormatBytes(st.st_size) == FormatBytes(max_bytes);
        return Fail(Quoted(path) + " is " + (same ? std::to_string(st.st_size) + " bytes" : FormatBytes(st.st_size)) + ", more than the " +
                    (same ? std::to_string(max_bytes) + " bytes" : FormatBytes(max_bytes)) + " such a file may be");
    }
    return Ok{};
}

namespace {

// ReadFile's and ReadFileHead's: with `whole`, more than max_bytes is an error; else cut there.
Result<std::string> ReadRegularFile(const std::string& path, size_t max_bytes, bool whole) {
    if (auto s = CheckRegularFile(path, whole ? max_bytes : SIZE_MAX); !s) return Fail(s.error());
    // O_NONBLOCK: should the path have been swapped for a FIFO since the check, opening it does
    // not wait for a writer; fstat on the open file then refuses it.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return Fail("cannot open " + Quoted(path));
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return Fail(Quoted(path) + " is not a regular file");
    }
    std::string bytes;
    bytes.resize(std::min<size_t>(static_cast<size_t>(st.st_size), max_bytes) + 1);
    size_t got = 0;
    while (got < bytes.size()) {
        const ssize_t n = ::read(fd, &bytes[got], bytes.size() - got);
        if (n < 0) {
            ::close(fd);
            return Fail("cannot read " + Quoted(path));
        }
        if (n == 0) break;
        got += static_cast<size_t>(n);
        if (got == bytes.size() && got <= max_bytes) bytes.resize(std::min(max_bytes + 1, bytes.size() * 2));  // it grew
    }
    ::close(fd);
    if (got > max_bytes && whole) return Fail(Quoted(path) + " is more than the " + FormatBytes(max_bytes) + " such a file may be");
    bytes.resize(std::min(got, max_bytes));
    return bytes;
}

}  // namespace

Result<std::string> ReadFile(const std::string& path, size_t max_bytes) { return ReadRegularFile(path, max_bytes, true); }

Result<std::string> ReadFileHead(const std::string& path, size_t max_bytes) { return ReadRegularFile(path, max_bytes, false); }

Result<nlohmann::json> ParseJsonText(std::string_view text, std::vector<std::string>* duplicate_keys, size_t tree) {
    // The parser takes a NUL for the end of the text: what followed one was never read (a session
    // cut at a NUL opened, its rest unread).
    if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
        return Fail("a NUL byte at byte " + std::to_string(nul) + ": not JSON text (a string holds one as \\u0000)");
    const size_t ratio = std::max<size_t>(tree, 1);
    const size_t cap = text.size() > (SIZE_MAX - (size_t{16} << 20)) / ratio ? SIZE_MAX : (size_t{16} << 20) + ratio * text.size();
    DepthCheck check(duplicate_keys, std::min(cap, QuarterOfMemory()));
    if (!nlohmann::json::sax_parse(text, &check)) return Fail(check.error.empty() ? "invalid JSON" : check.error);
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        return Fail(JsonErrorText(e));
    }
}

std::filesystem::path ResolvedPath(const std::string& path, std::error_code& ec) {
    // Absolute first: a bare relative name not made yet ("x", inside the current folder) resolved to
    // itself, and no parent of it was the folder. No trailing separator: "OUT/nope/.." resolves to
    // "OUT/", which no parent of a path inside OUT equalled.
    std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec).lexically_normal();
    if (!p.has_filename() && p != p.root_path()) p = p.parent_path();
    return p;
}

bool IsWithin(const std::string& path, const std::string& folder) {
    std::error_code ec;
    const std::filesystem::path outer = ResolvedPath(folder, ec);
    if (ec) return false;
    for (std::filesystem::path p = ResolvedPath(path, ec); !ec && !p.empty(); p = p.parent_path()) {
        if (p == outer) return true;
        if (p == p.parent_path()) break;
    }
    return false;
}

std::string JsonErrorText(const std::exception& e) {
    std::string_view what = e.what();
    if (what.rfind("[json.exception.", 0) == 0 && what.find("] ") != std::string_view::npos) what.remove_prefix(what.find("] ") + 2);
    return EscapeForMessage(what, 400);
}

Result<nlohmann::json> ParseJsonFile(const std::string& path, size_t max_bytes, size_t tree) {
    auto text = ReadFile(path, max_bytes);
    if (!text) return Fail(text.error());
    auto json = ParseJsonText(*text, nullptr, tree);
    if (!json) return Fail(EscapeForMessage(path) + ": invalid JSON (" + json.error() + ")");
    return json;
}

std::string EscapeForMessage(std::string_view text, size_t max_chars) {
    std::string out;
    size_t chars = 0;
    for (size_t i = 0; i < text.size();) {
        if (chars == max_chars) return out + "...";
        const unsigned char c = static_cast<unsigned char>(text[i]);
        // The length of a well-formed UTF-8 character starting here, 0 if it is not one.
        size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
        if (len > 1) {
            if (i + len > text.size()) len = 0;
            for (size_t k = 1; k < len; ++k)
                if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) len = 0;
        }
        if (len == 1 && c >= 0x20 && c != 0x7F) {
            out += static_cast<char>(c);
        } else if (len > 1) {
            // C1 controls (U+0080..U+009F) drive some terminals too, and the bidirectional controls
            // reorder what follows them.
            const auto b = [&](size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(text[i + k]) & 0x3F); };
            const char32_t code = len == 2 ? (static_cast<char32_t>(c & 0x1F) << 6) | b(1)
                                  : len == 3 ? (static_cast<char32_t>(c & 0x0F) << 12) | (b(1) << 6) | b(2)
                                             : 0x10000;
            if (IsHiddenControl(code)) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(code));
                out += buf;
            } else {
                out.append(text.data() + i, len);
            }
        } else {
            len = 1;
            switch (c) {
                case '\n': out += "\\n"; break;
                case '\r': out += "\\r"; break;
                case '\t': out += "\\t"; break;
                default: {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\x%02x", c);
                    out += buf;
                }
            }
        }
        i += len;
        ++chars;
    }
    return out;
}

std::string Quoted(std::string_view text) { return "'" + EscapeForMessage(text) + "'"; }

std::string JsonText(const nlohmann::json& value, int indent) {
    std::string text = value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
    // The library escapes U+0000..U+001F only. The text is UTF-8 now, outside its strings ASCII
    // without DEL, so byte 0x7F and the pairs C2 80..C2 9F are those characters in strings.
    const auto control = [&](size_t i) {
        const auto b = static_cast<unsigned char>(text[i]);
        return b == 0x7F || (b == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9F);
    };
    size_t i = 0;
    while (i < text.size() && !control(i)) ++i;
    if (i == text.size()) return text;
    std::string out = text.substr(0, i);
    out.reserve(text.size() + 16);
    for (; i < text.size(); ++i) {
        if (!control(i)) {
            out += text[i];
            continue;
        }
        const unsigned code = text[i] == 0x7F ? 0x7Fu : static_cast<unsigned char>(text[++i]);
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", code);
        out += escaped;
    }
    return out;
}

std::string DescribeJson(const nlohmann::json& value) {
    switch (value.type()) {
        case nlohmann::json::value_t::object: return "an object of " + std::to_string(value.size()) + " keys";
        case nlohmann::json::value_t::array: return "an array of " + std::to_string(value.size());
        case nlohmann::json::value_t::string: return "'" + EscapeForMessage(value.get_ref<const std::string&>()) + "'";
        case nlohmann::json::value_t::null: return "null";
        case nlohmann::json::value_t::binary: return "binary data";
        default: return value.dump();  // a number or a boolean
    }
}

namespace {

// The temporaries and folders RemoveUnfinishedTemporaries removes; `mutex` is recursive because a
// PuttingInPlace may make a temporary (ReplaceFolder's folder aside).
struct Made {
    std::string path;
    dev_t dev;
    ino_t ino;
};
struct Unfinished {
    std::recursive_mutex mutex;
    std::vector<Made> temporaries;
    size_t prune_at = 256;
    std::vector<std::string> folders;
};
Unfinished& Registry() {
    static Unfinished* registry = new Unfinished;  // never destroyed: an interrupt may come during exit
    return *registry;
}

// Whether `m` is still there under its temporary name: the same inode, not a later file of that name.
bool StillThere(const Made& m) {
    struct stat st;
    return ::lstat(m.path.c_str(), &st) == 0 && st.st_dev == m.dev && st.st_ino == m.ino;
}

// Called with the mutex held, right after `path` was made. Temporaries put in place or removed are
// forgotten now and then, so that a long session's registry stays the size of its unfinished work.
void Remember(const std::string& path) {
    Unfinished& r = Registry();
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) return;
    if (r.temporaries.size() >= r.prune_at) {
        r.temporaries.erase(std::remove_if(r.temporaries.begin(), r.temporaries.end(), [](const Made& m) { return !StillThere(m); }),
                            r.temporaries.end());
        r.prune_at = std::max<size_t>(256, 2 * r.temporaries.size());
    }
    r.temporaries.push_back({path, st.st_dev, st.st_ino});
}

}  // namespace

int RemoveUnfinishedTemporaries() {
    Unfinished& r = Registry();
    r.mutex.lock();  // never unlocked: the process ends with nothing more put in place
    int removed = 0;
    for (auto it = r.temporaries.rbegin(); it != r.temporaries.rend(); ++it) {
        if (!StillThere(*it)) continue;
        // A folder is renamed first: a writer still running cannot make a file in it after that.
        std::string gone = it->path;
        if (std::filesystem::is_directory(std::filesystem::symlink_status(gone)) && ::rename(gone.c_str(), (gone + "-removed").c_str()) == 0)
            gone += "-removed";
        std::error_code ec;
        std::filesystem::remove_all(gone, ec);  // a link inside is removed, never followed
        removed += !ec;
    }
    for (auto it = r.folders.rbegin(); it != r.folders.rend(); ++it) removed += ::rmdir(it->c_str()) == 0;
    return removed;
}

PuttingInPlace::PuttingInPlace() { Registry().mutex.lock(); }
PuttingInPlace::~PuttingInPlace() { Registry().mutex.unlock(); }

void FoldersInProgress::Add(const std::string& folder) {
    std::lock_guard<std::recursive_mutex> lock(Registry().mutex);
    Registry().folders.push_back(folder);
    m_folders.push_back(folder);
}

FoldersInProgress::~FoldersInProgress() {
    std::lock_guard<std::recursive_mutex> lock(Registry().mutex);
    std::vector<std::string>& all = Registry().folders;
    for (const std::string& f : m_folders)
        if (auto it = std::find(all.begin(), all.end(), f); it != all.end()) all.erase(it);
}

// The entries beside `path` named ".NAME.ssaviz-TAG" (NAME its file name), as (entry, TAG).
static std::vector<std::pair<std::string, std::string>> TemporariesOf(const std::string& path) {
    const std::filesystem::path target(path);
    const std::string prefix = "." + target.filename().string() + ".ssaviz-";
    const std::filesystem::path dir = target.parent_path().empty() ? "." : target.parent_path();
    std::vector<std::pair<std::string, std::string>> found;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0) found.emplace_back(it->path().string(), name.substr(prefix.size()));
    }
    return found;
}

std::vector<std::string> AbandonedTempFiles(const std::string& path, int age_seconds) {
    std::vector<std::string> found;
    for (const auto& [at, full_tag] : TemporariesOf(path)) {
        if (full_tag.size() <= 4 || full_tag.compare(full_tag.size() - 4, 4, ".tmp") != 0) continue;
        const std::string tag = full_tag.substr(0, full_tag.size() - 4);  // PID-N
        const size_t dash = tag.find('-');
        if (dash == 0 || dash == std::string::npos || dash > 9 || dash + 1 == tag.size() ||
            tag.find_first_not_of("0123456789-") != std::string::npos || tag.find('-', dash + 1) != std::string::npos)
            continue;
        const long pid = std::stol(tag.substr(0, dash));
        if (pid <= 0 || pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to ask
        struct stat st;
        if (::lstat(at.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && std::time(nullptr) - st.st_ctime >= age_seconds)
            found.push_back(at);
    }
    return found;
}

Result<std::string> CreateTempFileBeside(const std::string& path) {
    static std::atomic<unsigned> counter{0};
    for (const std::string& left : AbandonedTempFiles(path)) ::unlink(left.c_str());
    const std::filesystem::path target(path);
    for (int attempt = 0; attempt < 100; ++attempt) {
        const std::string name = "." + target.filename().string() + ".ssaviz-" + std::to_string(::getpid()) + "-" +
                                 std::to_string(counter++) + ".tmp";
        const std::string temp = (target.parent_path() / name).string();
        std::lock_guard<std::recursive_mutex> lock(Registry().mutex);
        const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) {
            ::close(fd);
            Remember(temp);
            return temp;
        }
        if (errno != EEXIST) return Fail(Quoted(path) + ": cannot write (" + std::strerror(errno) + ")");
    }
    return Fail(Quoted(path) + ": cannot create a temporary file beside it");
}

std::error_code MakeFolders(const std::string& path) {
    std::error_code ec;
    for (int attempt = 0; attempt < 16; ++attempt) {
        ec.clear();
        std::filesystem::create_directories(path, ec);
        if (ec != std::errc::no_such_file_or_directory) return ec;
    }
    return ec;
}

Result<std::string> CreateTempFolderBeside(const std::string& path) {
    const std::filesystem::path target(path);
    std::string name = (target.parent_path() / ("." + target.filename().string() + ".ssaviz-XXXXXX")).string();
    {
        std::lock_guard<std::recursive_mutex> lock(Registry().mutex);
        if (!::mkdtemp(name.data())) return Fail(Quoted(path) + ": cannot make a folder beside it (" + std::strerror(errno) + ")");
        Remember(name);
    }
    // mkdtemp makes it private (0700); a folder ssaviz writes gets what any new folder would. The
    // umask is read, not set and restored, so that other threads' files never see another one.
    mode_t mask = 022;
    if (std::FILE* status = std::fopen("/proc/self/status", "r")) {
        char line[256];
        unsigned value = 0;
        while (std::fgets(line, sizeof line, status))
            if (std::sscanf(line, "Umask: %o", &value) == 1) mask = static_cast<mode_t>(value);
        std::fclose(status);
    }
    ::chmod(name.c_str(), 0777 & ~mask);
    return name;
}

std::vector<std::string> AbandonedTempFolders(const std::string& path, int age_seconds) {
    std::vector<std::string> found;
    for (const auto& [at, tag] : TemporariesOf(path)) {
        // mkdtemp's six letters and digits only: ".export.ssaviz-userdata" is someone's folder.
        const bool made_by_mkdtemp = tag.size() == 6 && std::all_of(tag.begin(), tag.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); });
        if (!made_by_mkdtemp) continue;
        struct stat st;
        // A folder just made, before its maker's lock, is left (with no age asked, none: time() may
        // read a second behind a timestamp the file system has just set, so "0 s" could skip it).
        if (::lstat(at.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
            (age_seconds > 0 && std::time(nullptr) - st.st_ctime < age_seconds))
            continue;
        const int fd = ::open(at.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        if (::flock(fd, LOCK_EX | LOCK_NB) == 0) found.push_back(at);  // no process holds it
        ::close(fd);
    }
    return found;
}

Result<HeldTempFolder> HeldTempFolder::Create(const std::string& path, int age_seconds) {
    for (const std::string& left : AbandonedTempFolders(path, age_seconds)) {
        std::error_code ignored;
        std::filesystem::remove_all(left, ignored);  // a link inside is removed, never followed
    }
    auto made = CreateTempFolderBeside(path);
    if (!made) return Fail(made.error());
    const int fd = ::open(made->c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && ::flock(fd, LOCK_SH | LOCK_NB) != 0) {  // no flock here: nor can another process ask, and it keeps the folder
        ::close(fd);
        return HeldTempFolder(*made, -1);
    }
    return HeldTempFolder(*made, fd);
}

HeldTempFolder::~HeldTempFolder() {
    if (m_fd >= 0) ::close(m_fd);
}

namespace {

// In a sticky folder (mode 1777, as /tmp) only an entry's owner, or the folder's, may move, replace
// or remove it, whatever access() says of the folder.
bool StickyKeeps(const struct stat& dir, const struct stat& entry) {
    const uid_t me = ::geteuid();
    return (dir.st_mode & S_ISVTX) && me != 0 && dir.st_uid != me && entry.st_uid != me;
}

// A place a folder goes: absent or a folder, never a link.
Status FolderPlace(const std::filesystem::path& p) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) return errno == ENOENT ? Status(Ok{}) : Fail(Quoted(p.string()) + ": cannot read (" + std::strerror(errno) + ")");
    if (S_ISLNK(st.st_mode)) return Fail(Quoted(p.string()) + " is a symbolic link: ssaviz does not write through links inside --out");
    if (!S_ISDIR(st.st_mode)) return Fail(Quoted(p.string()) + " is in the way: not a folder");
    return Ok{};
}

}  // namespace

Status CheckFoldersBelow(const std::string& root, const std::string& folder) {
    const std::filesystem::path base = std::filesystem::path(root).lexically_normal(), rel = std::filesystem::path(folder).lexically_normal().lexically_relative(base);
    if (rel.empty() || *rel.begin() == "..") return Fail(Quoted(folder) + " is not inside " + Quoted(root));
    std::filesystem::path at = base, deepest = base;
    for (const std::filesystem::path& part : rel) {
        if (part == ".") continue;
        at /= part;
        if (auto s = FolderPlace(at); !s) return s;
        if (struct stat st {}; ::lstat(at.c_str(), &st) == 0) deepest = at;
    }
    // Where the files go, or the folder the missing ones are made in: writable (a read-only run/
    // under --export-to was found once the whole timeline had run).
    if (::access(deepest.c_str(), W_OK | X_OK) != 0 && errno != ENOENT)
        return Fail(Quoted(deepest.string()) + ": cannot write in it (" + std::strerror(errno) + ")");
    return Ok{};
}

Status MoveTreeInto(const std::string& staged, const std::string& out) {
    namespace fs = std::filesystem;
    auto fail = [&](const std::string& why) -> Status {
        std::error_code ignored;
        fs::remove_all(staged, ignored);  // ours: links inside are removed, never followed
        return Fail(why);
    };
    std::vector<fs::path> folders, files;  // relative to `staged`, folders outermost first
    std::error_code ec;
    for (fs::recursive_directory_iterator it(staged, ec), end; !ec && it != end; it.increment(ec)) {
        const fs::path rel = it->path().lexically_relative(staged);
        (it->is_directory(ec) && !it->is_symlink(ec) ? folders : files).push_back(rel);
    }
    if (ec) return fail(Quoted(staged) + ": cannot read (" + ec.message() + ")");
    for (const fs::path& rel : folders)
        if (auto s = FolderPlace(fs::path(out) / rel); !s) return fail(s.error());
    for (const fs::path& rel : files)
        if (auto s = CheckFilePlace((fs::path(out) / rel).string()); !s) return fail(s.error());
    // Every folder a file moves into, where it is already there, takes the move: writable and on
    // the staged folder's file system (an unwritable curves/ or a mount point there failed the
    // move half way, run.csv replaced and run.json not).
    struct stat from {};
    if (::stat(staged.c_str(), &from) != 0) return fail(Quoted(staged) + ": cannot read (" + std::strerror(errno) + ")");
    std::vector<fs::path> targets = {fs::path(out)};
    for (const fs::path& rel : folders) targets.push_back(fs::path(out) / rel);
    for (const fs::path& to : targets) {
        struct stat st {};
        if (::lstat(to.c_str(), &st) != 0) continue;  // made below, in a folder checked here
        if (::access(to.c_str(), W_OK | X_OK) != 0) return fail(Quoted(to.string()) + ": cannot write in it (" + std::strerror(errno) + ")");
        if (st.st_dev != from.st_dev) return fail(Quoted(to.string()) + " is on another file system than " + Quoted(out) + ": files cannot be moved into it whole");
    }
    PuttingInPlace all_or_none;
    std::vector<fs::path> created;  // the folders made here, removed again where the files do not go in
    auto unmake = [&](const std::string& why) {
        for (auto it = created.rbegin(); it != created.rend(); ++it) ::rmdir(it->c_str());
        return fail(why);
    };
    for (const fs::path& rel : folders) {
        const fs::path to = fs::path(out) / rel;
        if (::mkdir(to.c_str(), 0777) == 0) created.push_back(to);
        else if (errno != EEXIST) return unmake(Quoted(to.string()) + ": cannot create (" + std::strerror(errno) + ")");
        if (auto s = FolderPlace(to); !s) return unmake(s.error());  // made meanwhile by another: still never a link
    }
    // A file or a link at the place is replaced rather than written through; all of them or none.
    std::vector<std::pair<std::string, std::string>> moves;
    for (const fs::path& rel : files) moves.emplace_back((fs::path(staged) / rel).string(), (fs::path(out) / rel).string());
    if (auto s = RenameAllOrNone(moves); !s) return unmake(s.error());
    fs::remove_all(staged, ec);
    return Ok{};
}

Status CheckReplaceableFolder(const std::string& path, const std::function<Status(const std::string&)>& owned) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) {
        if (errno == ENOENT) return Ok{};
        return Fail(Quoted(path) + ": cannot read (" + std::strerror(errno) + ")");
    }
    if (S_ISLNK(st.st_mode)) return Fail(Quoted(path) + " is a symbolic link: ssaviz does not write through links");
    if (!S_ISDIR(st.st_mode)) return Fail(Quoted(path) + " is " + (S_ISREG(st.st_mode) ? "a file" : KindOf(st)) + " where ssaviz writes a folder");
    if (auto s = owned(path); !s) return s;
    // The old folder is removed once the new one is in its place: every folder in it must let its
    // entries go (another user's run/ was swapped out and left behind, hidden, under run.new's name).
    const std::string parent = std::filesystem::path(path).parent_path().string(), above = parent.empty() ? "." : parent;
    struct stat parent_st {};
    if (::access(above.c_str(), W_OK | X_OK) != 0 || ::stat(above.c_str(), &parent_st) != 0)
        return Fail(Quoted(path) + " cannot be replaced: " + Quoted(above) + " is not writable (" + std::strerror(errno) + ")");
    if (StickyKeeps(parent_st, st)) return Fail(Quoted(path) + " cannot be replaced: it is another user's, in a sticky folder");
    std::vector<std::string> folders = {path};
    while (!folders.empty()) {
        const std::string dir = std::move(folders.back());
        folders.pop_back();
        struct stat dir_st {};
        if (::access(dir.c_str(), W_OK | X_OK) != 0 || ::lstat(dir.c_str(), &dir_st) != 0)
            return Fail(Quoted(path) + " cannot be replaced: " + Quoted(dir) + " in it cannot be emptied (" + std::strerror(errno) +
                        "; another user's?)");
        std::error_code ec;
        for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
            struct stat entry {};
            if (::lstat(it->path().c_str(), &entry) != 0) continue;  // gone meanwhile
            if (StickyKeeps(dir_st, entry))
                return Fail(Quoted(path) + " cannot be replaced: " + Quoted(it->path().string()) + " in it is another user's, in a sticky folder");
            if (S_ISDIR(entry.st_mode)) folders.push_back(it->path().string());
        }
    }
    return Ok{};
}

Status ReplaceFolder(const std::string& temp, const std::string& path, const std::function<Status(const std::string&)>& owned) {
    if (auto s = CheckReplaceableFolder(path, owned); !s) return s;
    PuttingInPlace swap;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) {
        if (::rename(temp.c_str(), path.c_str()) != 0) return Fail(Quoted(path) + ": cannot put it in place (" + std::strerror(errno) + ")");
        return Ok{};
    }
#ifdef RENAME_EXCHANGE
    // Where the file system can, the two swap names in one step, so `path` is whole at every
    // moment (a process killed between two renames left no folder there); the old one, now at
    // `temp`'s name, is removed.
    if (::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) == 0) {
        std::error_code ec;
        std::filesystem::remove_all(temp, ec);  // links inside are removed, never followed
        return Ok{};
    }
#endif
    // rename() moves a folder onto an empty one: the old folder goes aside under a fresh name.
    auto aside = CreateTempFolderBeside(path);
    if (!aside) return Fail(aside.error());
    if (::rename(path.c_str(), aside->c_str()) != 0) {
        const std::string why = std::strerror(errno);
        ::rmdir(aside->c_str());
        return Fail(Quoted(path) + ": cannot move it aside (" + why + ")");
    }
    if (::rename(temp.c_str(), path.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        ::rename(aside->c_str(), path.c_str());
        return Fail(Quoted(path) + ": cannot put it in place (" + why + ")");
    }
    std::error_code ec;
    std::filesystem::remove_all(*aside, ec);  // links inside are removed, never followed
    return Ok{};
}

Status CheckFilePlace(const std::string& path) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? Status(Ok{}) : Fail(Quoted(path) + ": cannot read (" + std::strerror(errno) + ")");
    if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
        // Another user's in a sticky folder: found once every figure had been drawn, exit 1.
        const std::string parent = std::filesystem::path(path).parent_path().string();
        struct stat dir {};
        if (::stat(parent.empty() ? "." : parent.c_str(), &dir) == 0 && StickyKeeps(dir, st))
            return Fail(Quoted(path) + " is another user's, in a sticky folder: ssaviz cannot replace it");
        return Ok{};
    }
    if (S_ISDIR(st.st_mode)) return Fail(Quoted(path) + " is a folder where ssaviz writes a file");
    return Fail(Quoted(path) + " is " + KindOf(st) + ", not a file: ssaviz does not replace it");
}

Status CheckCanWriteFile(const std::string& path) {
    if (auto s = CheckFilePlace(path); !s) return s;
    auto temp = CreateTempFileBeside(path);
    if (!temp) return Fail(temp.error());
    ::unlink(temp->c_str());
    return Ok{};
}

namespace {

// `bytes` into a new temporary file beside `path`; its name, or an error naming `path` (nothing left behind).
Result<std::string> WriteTempBeside(const std::string& path, std::string_view bytes) {
    if (auto s = CheckFilePlace(path); !s) return Fail(s.error());
    auto temp = CreateTempFileBeside(path);
    if (!temp) return Fail(temp.error());
    auto fail = [&](const std::string& why) -> Result<std::string> {
        ::unlink(temp->c_str());
        return Fail(Quoted(path) + ": " + why);
    };
    const int fd = ::open(temp->c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return fail(std::string("cannot write (") + std::strerror(errno) + ")");
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const std::string why = std::string("write failed (") + std::strerror(errno) + ")";
            ::close(fd);
            return fail(why);
        }
        done += static_cast<size_t>(n);
    }
    if (::close(fd) != 0) return fail(std::string("write failed (") + std::strerror(errno) + ")");
    return temp;
}

}  // namespace

Status WriteFileAtomically(const std::string& path, std::string_view bytes) { return WriteFilesAtomically({{path, bytes}}); }

Status RenameAllOrNone(const std::vector<std::pair<std::string, std::string>>& moves, bool may_exchange) {
    // Where each move put the file it replaced: the move's first path (swapped with it), a name
    // beside that (linked or moved aside), or nowhere (nothing was there, or the last move's, which
    // no later failure undoes).
    struct Made {
        size_t k;
        std::string replaced;
        bool swapped = false;
    };
    std::vector<Made> made;
    made.reserve(moves.size());  // nothing to allocate once a rename is done
    // Undone from the last: each new file back at its first path, each replaced one back in place.
    // One that cannot go back is kept beside its place, and said.
    auto undo = [&]() -> std::string {
        std::string kept;
        for (auto it = made.rbegin(); it != made.rend(); ++it) {
            const auto& [from, to] = moves[it->k];
            bool back = true;
#ifdef RENAME_EXCHANGE
            if (it->swapped) back = ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) == 0;
#endif
            if (!it->swapped) back = ::rename(to.c_str(), from.c_str()) == 0 && (it->replaced.empty() || ::rename(it->replaced.c_str(), to.c_str()) == 0);
            if (back || it->replaced.empty()) continue;
            const std::string old = it->swapped ? from : it->replaced, keep = to + ".ssaviz-kept";
            if (::rename(old.c_str(), keep.c_str()) == 0) kept += "; the earlier " + Quoted(to) + " is kept as " + Quoted(keep);
            else kept += "; the earlier " + Quoted(to) + " is at " + Quoted(old);
        }
        return kept;
    };
    // A name beside `from` that nothing holds, for the file a move replaces.
    auto free_name = [](const std::string& from) {
        std::string name = from + ".replaced";
        for (int n = 1; n < 1000; ++n) {
            struct stat st {};
            if (::lstat(name.c_str(), &st) != 0 && errno == ENOENT) break;
            name = from + ".replaced-" + std::to_string(n);
        }
        return name;
    };
    for (size_t k = 0; k < moves.size(); ++k) {
        const auto& [from, to] = moves[k];
        const bool last = k + 1 == moves.size();  // its own rename replaces at once, and nothing after it can fail
        const std::string aside = last ? "" : free_name(from);
        struct stat st {};
        std::string why;
        if (::lstat(to.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
            why = "a folder is there, where ssaviz writes a file";  // an exchange would swap it in
        } else if (::lstat(to.c_str(), &st) != 0 || last) {
            if (::rename(from.c_str(), to.c_str()) == 0) {
                made.push_back({k, "", false});
                continue;
            }
            why = std::strerror(errno);
        } else {
#ifdef RENAME_EXCHANGE
            // The two swap names in one step: `to` whole at every moment, the old file at `from`.
            if (may_exchange && ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) == 0) {
                made.push_back({k, from, true});
                continue;
            }
#endif
            // Else the old file kept under a second name (a link: `to` replaced in one step), or
            // where the file system has no links, moved aside before the new one goes in.
            if (::link(to.c_str(), aside.c_str()) == 0) {
                if (::rename(from.c_str(), to.c_str()) == 0) {
                    made.push_back({k, aside, false});
                    continue;
                }
                why = std::strerror(errno);
                ::unlink(aside.c_str());
            } else if (::rename(to.c_str(), aside.c_str()) != 0) {
                why = std::strerror(errno);
            } else if (::rename(from.c_str(), to.c_str()) != 0) {
                why = std::strerror(errno);
                ::rename(aside.c_str(), to.c_str());
            } else {
                made.push_back({k, aside, false});
                continue;
            }
        }
        if (struct stat gone {}; ::lstat(from.c_str(), &gone) != 0) why = "its new version is gone (" + why + ")";
        const std::string kept = undo();
        return Fail(Quoted(to) + ": cannot replace it (" + why + ")" + (kept.empty() ? "; nothing was replaced" : kept));
    }
    for (const Made& m : made)
        if (!m.replaced.empty()) ::unlink(m.replaced.c_str());
    return Ok{};
}

Status WriteFilesAtomically(const std::vector<std::pair<std::string, std::string_view>>& files) {
    std::vector<std::string> temps;
    auto fail = [&](const std::string& why) -> Status {
        for (const std::string& t : temps) ::unlink(t.c_str());
        return Fail(why);
    };
    for (const auto& [path, bytes] : files) {
        auto temp = WriteTempBeside(path, bytes);
        if (!temp) return fail(temp.error());
        temps.push_back(std::move(*temp));
    }
    std::vector<std::pair<std::string, std::string>> moves;
    for (size_t i = 0; i < files.size(); ++i) moves.emplace_back(temps[i], files[i].first);
    PuttingInPlace all_or_none;
    if (auto s = RenameAllOrNone(moves); !s) return fail(s.error());  // every file as it was, the temporaries ours again
    return Ok{};
}

std::string ExecutableDir() {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? "" : exe.parent_path().string();
}

}  // namespace model
