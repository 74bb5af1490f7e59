// Small file helpers shared by the loaders, the trainer and the app. Every file ssaviz reads is
// treated as possibly hostile: it must be a regular file (not a FIFO, a device or a folder) and
// no larger than a limit suited to its kind; JSON nests at most kMaxJsonDepth deep; anything
// echoed from a file into a message is escaped and bounded.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/io/result.h"

namespace model {

// Size limits by kind of file (bytes). Weights are memory-mapped, not read, so have none here.
constexpr size_t kMaxTextFileBytes = size_t{64} << 20;      // --text-file, batch files, training text
constexpr size_t kMaxJsonFileBytes = size_t{64} << 20;      // config.json, sessions, state/train.json
constexpr size_t kMaxTokenizerFileBytes = size_t{256} << 20;  // vocab.json, merges.txt, tokenizer.json, tokenizer.model
constexpr size_t kMaxCorpusFileBytes = size_t{1} << 30;      // one file of a training corpus
constexpr int kMaxJsonDepth = 64;                          // nesting of any JSON ssaviz reads

// Checks that `path` names a regular file (following a link to one) of at most `max_bytes`; the
// error names the path and says what it is instead ("is a folder", "is a FIFO or device", "is
// 3.1 GB, more than the 64 MB a text file may be", "does not exist").
Status CheckRegularFile(const std::string& path, size_t max_bytes);

// A whole regular file of at most `max_bytes` as bytes; the error names the path. Reads at most
// max_bytes + 1 bytes whatever the file claims, so a file that grows while read is refused too.
Result<std::string> ReadFile(const std::string& path, size_t max_bytes);
// The first `max_bytes` of a regular file however long it is (a list read from its start: recent
// models); the error names the path.
Result<std::string> ReadFileHead(const std::string& path, size_t max_bytes);
// The memory a JSON text's tree may take, as a multiple of the text's size (and 16 MB more), and at
// most a quarter of the machine's memory: the tree holds each value in 16 to 100 bytes, so a file
// of empty objects ("[{},{},...]", 3 bytes each) took 35 times its size, and where that failed the
// parser's unwinding aborted. Legitimate files take less: a config, a session or a safetensors
// header under 10 times; a tokenizer's merges ("["a","b"]") about 23 times (kTokenizerJsonTree).
constexpr size_t kJsonTree = 16, kTokenizerJsonTree = 32;
// A whole file parsed as JSON (at most `max_bytes`, nesting at most kMaxJsonDepth, its tree at most
// `tree` times its size); the error names the path and the parser's complaint.
Result<nlohmann::json> ParseJsonFile(const std::string& path, size_t max_bytes = kMaxJsonFileBytes, size_t tree = kJsonTree);
// JSON text parsed with nesting at most kMaxJsonDepth and its tree's memory bounded as above; the
// error is the parser's complaint, the depth or the memory, without a path. Given `duplicate_keys`,
// the dotted names of keys an object gives twice (the value kept is the last, as Python's json
// keeps it) are added to it, at most 20, each at most 120 characters.
Result<nlohmann::json> ParseJsonText(std::string_view text, std::vector<std::string>* duplicate_keys = nullptr, size_t tree = kJsonTree);

// `path` absolute, its links resolved where its parts exist (a part that does not exist yet taken
// as named, ".." after it applied), without a trailing separator.
std::filesystem::path ResolvedPath(const std::string& path, std::error_code& ec);
// Whether `path` is `folder` or inside it, by ResolvedPath; false where `folder` cannot be resolved.
bool IsWithin(const std::string& path, const std::string& folder);

// Text from a file or a value, made safe to put in a one-line message: control characters and
// bytes that are not UTF-8 escaped (\n, \x1b), at most `max_chars` characters kept ("..." marks a cut).
std::string EscapeForMessage(std::string_view text, size_t max_chars = 200);
// A path or name in a message: EscapeForMessage's text in single quotes.
std::string Quoted(std::string_view text);
// A JSON value in a message: a string quoted and escaped, a number as itself, an object or array
// as "an object" / "an array of 3" (never dumped: it may nest a million levels deep).
std::string DescribeJson(const nlohmann::json& value);

// A JSON library error as a message: what it says, escaped, without the library's own tag
// ("[json.exception.parse_error.101] ").
std::string JsonErrorText(const std::exception& e);

// JSON text of a value ssaviz writes (files, --json, Python): strings that hold bytes which are not
// UTF-8 (a folder's name, a token piece) come out with U+FFFD for each bad byte instead of throwing,
// and every control character is escaped: DEL and U+0080..U+009F as well as U+0000..U+001F (a byte
// piece <0x7F> showed nothing in a terminal, and the C1 controls can act on one).
std::string JsonText(const nlohmann::json& value, int indent = -1);

// Writing without ever leaving a half-written file or writing through a link: the bytes go to a
// new temporary file beside `path` (created exclusively, never following a link), which is then
// renamed over `path`. A link at `path` is replaced, not followed; on any failure `path` is left as
// it was and the temporary file removed.
Status WriteFileAtomically(const std::string& path, std::string_view bytes);
// Files that belong together (a screenshot and its description): each written to its temporary
// file first, and only once all are written are they renamed into place, so that a failure to
// write any of them replaces none.
Status WriteFilesAtomically(const std::vector<std::pair<std::string, std::string_view>>& files);
// Renames each move's first path over its second (a file or link there replaced, never followed;
// a folder there refused), all or none: where one fails (a file there that cannot be replaced:
// immutable, busy), those already made are undone, every file they replaced back in place, and the
// error names the place. Each place is whole at every moment: a replaced file is swapped to the
// first path (renameat2's RENAME_EXCHANGE), else kept under a second name beside it (a hard link;
// moved aside where the file system has none), and removed once all are in place; the last move is
// a plain rename, which nothing after it can undo. `may_exchange` false: as on a file system
// without the exchange (tests). Call it holding a PuttingInPlace.
Status RenameAllOrNone(const std::vector<std::pair<std::string, std::string>>& moves, bool may_exchange = true);
// The first half of that for writers that stream: creates an empty temporary file beside `path`
// (".NAME.ssaviz-PID-N.tmp") exclusively and returns its path; the caller fills it and renames it.
// It first removes the temporary files of `path` a killed process left (AbandonedTempFiles).
Result<std::string> CreateTempFileBeside(const std::string& path);
// The temporary files of `path`'s name (".NAME.ssaviz-PID-N.tmp" beside it) whose process has
// ended: its PID is no process here, and they are regular files of this user's, made at least
// `age_seconds` ago. (A PID that is some other process now keeps its file; a process of another
// PID namespace or machine writing the same path at once may lose its temporary file, and its
// write then fails with an error.)
std::vector<std::string> AbandonedTempFiles(const std::string& path, int age_seconds = 60);

// Folders the same way (ssaviz train's model folders and checkpoint): an empty folder beside `path`
// (".NAME.ssaviz-XXXXXX", made exclusively, with the permissions a new folder gets), filled by the
// caller, then put in `path`'s place by ReplaceFolder. That refuses a link at `path` (never
// written through) and anything at `path` that `owned` does not accept (a folder it cannot prove
// the caller wrote is never deleted); the two swap names at once (renameat2's RENAME_EXCHANGE; else
// the old folder is moved aside and the new one renamed in), and only then the old one is removed.
// On failure `path` is as it was and `temp` is left to the caller.
Result<std::string> CreateTempFolderBeside(const std::string& path);
Status ReplaceFolder(const std::string& temp, const std::string& path, const std::function<Status(const std::string&)>& owned);
// What a process ended by Ctrl+C leaves: nothing half-written. Every temporary file and folder
// CreateTempFileBeside and CreateTempFolderBeside make is remembered (its name and inode), and
// RemoveUnfinishedTemporaries, for a process about to end, removes those still at their temporary
// names (the others were put in place or removed), then the still empty folders a
// FoldersInProgress holds. It waits for a PuttingInPlace in progress (several files that belong
// together moving into place, which then are all moved) and holds off any later one, and any new
// temporary, until the process ends. Returns how many it removed.
int RemoveUnfinishedTemporaries();
// Held while several renames put files that belong together in place (an export's files, a run's
// tree, a folder swapped for another), so that an interrupt finds all of them moved or none.
class PuttingInPlace {
public:
    PuttingInPlace();
    ~PuttingInPlace();
    PuttingInPlace(const PuttingInPlace&) = delete;
    PuttingInPlace& operator=(const PuttingInPlace&) = delete;
};
// Folders made for files not yet in place (an export's), which an interrupt removes where they are
// still empty, innermost first; forgotten when it goes.
class FoldersInProgress {
public:
    FoldersInProgress() = default;
    void Add(const std::string& folder);
    ~FoldersInProgress();
    FoldersInProgress(const FoldersInProgress&) = delete;
    FoldersInProgress& operator=(const FoldersInProgress&) = delete;

private:
    std::vector<std::string> m_folders;
};
// A temporary folder beside `path` (CreateTempFolderBeside's) held in use while this lives: a
// shared flock on it tells another process that it is being written. Making one first removes the
// temporary folders of `path`'s name that no process holds, made over a minute ago and this user's:
// those a process left when it was killed (SIGKILL, the OOM killer, a power cut), whose files had
// stayed hidden in the folder (an export's: gigabytes at 8,192 tokens). A folder whose lock cannot
// be asked (a file system without flock, or one that takes only shared locks on a folder) is kept.
// Moving it keeps the lock; the folder itself is the caller's to remove.
class HeldTempFolder {
public:
    static Result<HeldTempFolder> Create(const std::string& path, int age_seconds = 60);  // the age: AbandonedTempFolders'
    HeldTempFolder(HeldTempFolder&& other) noexcept : m_path(std::move(other.m_path)), m_fd(std::exchange(other.m_fd, -1)) {}
    HeldTempFolder& operator=(HeldTempFolder&&) = delete;
    HeldTempFolder(const HeldTempFolder&) = delete;
    ~HeldTempFolder();
    const std::string& path() const { return m_path; }

private:
    HeldTempFolder(std::string path, int fd) : m_path(std::move(path)), m_fd(fd) {}
    std::string m_path;
    int m_fd = -1;
};
// The temporary folders of `path`'s name (".NAME.ssaviz-XXXXXX" beside it, mkdtemp's six letters and
// digits) that HeldTempFolder::Create removes: no process holds them, they were made at least
// `age_seconds` ago, and they are this user's folders (not links).
std::vector<std::string> AbandonedTempFolders(const std::string& path, int age_seconds = 60);

// Whether `path` is absent, or a folder (not a link) that `owned` accepts: what ReplaceFolder
// requires, asked before long work that would end in it.
Status CheckReplaceableFolder(const std::string& path, const std::function<Status(const std::string&)>& owned);
// Why `path` cannot be looked at, after stat failed with `error` (errno): " does not exist", " is a
// loop of symbolic links", ": cannot read it (Permission denied)". To follow a quoted path.
std::string WhyNotThere(int error);

// Whether a file ssaviz writes may take `path`'s place: nothing there, a file, or a link (replaced,
// never written through); a folder, a FIFO, a device or a socket there is an error naming it (a
// screenshot at /dev/null replaced the device node).
Status CheckFilePlace(const std::string& path);
// CheckFilePlace, and that a file can be made beside `path` (a temporary one, removed at once):
// asked before long work that ends in writing `path` (a screenshot after the model has run).
Status CheckCanWriteFile(const std::string& path);

// A whole tree of files put in place at once (a training run's export: its steps' exports and its
// own files). `staged` is a folder this process made and filled (CreateTempFolderBeside inside
// `out`); its files are moved into `out` at the same relative paths, folders made as needed. Before
// anything moves every place is checked: a link or a file where a folder goes, or a folder where a
// file goes, is refused (nothing moved); a file at a file's place is replaced (a link there too,
// never followed). `staged` is removed at the end, and on failure, with what is left in it.
Status MoveTreeInto(const std::string& staged, const std::string& out);
// The folders from `root` (excluded: the user named it) down to `folder`: none may be a link or
// other than a folder where one exists, and the deepest that exists writable. The checks
// MoveTreeInto makes, asked before long work.
Status CheckFoldersBelow(const std::string& root, const std::string& folder);

// fs::create_directories that tolerates others making and removing the same folders meanwhile:
// another process's check of a shared missing parent (CheckExportFolder's probe: batch workers,
// two exports started together) may make and remove a folder on the way between this one's steps,
// which is tried again rather than failed. The error is the last attempt's.
std::error_code MakeFolders(const std::string& path);

// A byte count for messages: "512 bytes", "3.1 MB", "2.0 GB", "4.5 PB".
std::string FormatBytes(size_t bytes);

// The folder of the running executable (from /proc/self/exe); empty if unknown.
std::string ExecutableDir();

}  // namespace model
