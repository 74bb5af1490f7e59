#!/usr/bin/env bash
# Run HERE (Debian 12, with a package registry), from the project's root: the kit that lets a GPU
# machine without X, Mesa, GL loaders, GLFW or ImGui build the window and run it under Xvfb
# (bench/gpu-window.sh). Debian 12's packages, unpacked there under /opt, never into /:
#   .gpu/gui-debs = the window's -dev packages (ImGui, GLFW, GLVND's GL/GLX/OpenGL, and what GNU ld
#                   needs to follow libglfw's and libGLX's libraries), apart from .gpu/debs so that
#                   device-build.sh leaves them out of the other stages' /opt/deps: bench/gpu.sh's
#                   last stage, gui, unpacks them there and builds build-gpu-gui/ssaviz (call A, carry [".gpu"]);
#   .gpu/x-debs   = libLLVM's Z3, which rides along in call A: with it, .gpu-x and the tree would be
#                   over 60 MB;
#   .gpu-x/       = Xvfb, xkbcomp and the XKB data, Mesa (libGLX_mesa, swrast_dri, libLLVM-15), GLVND's
#                   loaders, GLFW with the X libraries it opens, glxinfo, and what all of them link, bar
#                   libxml2's ICU, which .gpu/debs has
#                   (call B, carry [".gpu-x", ".gpu/x-debs"], right after call A on the same warm machine:
#                   what call A carried does not stay there).
# It makes .gpu/ first when missing (../shared/gpu/prepare and Debian 12's ICU, as bench/gpu.sh's header
# says), adds /.gpu-x/ to .git/info/exclude, shows that every library Xvfb, xkbcomp, swrast_dri.so,
# libGLX_mesa, libglfw (with the libraries it opens) and the window's binary need is in the kit or is
# glibc / libstdc++ / libgcc_s / zlib, which any Ubuntu has, and prints the sizes of both calls.
#   usage: bash bench/gpu-window-kit.sh [--emulate]
#          SSAVIZ_WINDOW_BIN=build/ssaviz: a window build (SSAVIZ_GUI=ON) whose libraries to check too;
#          --emulate: then plays the GPU machine in private mount namespaces (as root): every file of the
#          kit's packages (and of what they depend on, as installed here) hidden, bar the base system;
#          (a) the window's configure (GUI=ON) against /opt/deps alone, and a GNU ld link of ImGui + GLFW
#          + OpenGL; (b) bench/gpu-window.sh's stage x (Xvfb, glxinfo) with all of that hidden; (c) the whole
#          of bench/gpu-window.sh on the CPU with SSAVIZ_WINDOW_BIN (whose Debian LibTorch keeps the
#          packages it loads itself visible), a small model (SSAVIZ_WINDOW_MODEL, else a random 2 x 4
#          one with a context of 2,048) and SSAVIZ_WINDOW_TOKENS (1000). Its logs and PNGs go to
#          /tmp/gpu-window-emu/out*.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
arch=x86_64-linux-gnu
# The window's -dev packages for call A. Headers: imgui (imgui.pc requires stb, already in the kit),
# GLFW/glfw3.h, GL/gl.h with KHR/khrplatform.h (libgl-dev); FindOpenGL (GLVND) wants libOpenGL.so and
# libGLX.so; GNU ld follows libglfw.so.3 and libGLX.so.0 to libX11, libxcb, libXau, libXdmcp, libbsd and libmd.
gui_dev=(libimgui-dev libglfw3-dev libglfw3 libgl-dev libgl1 libglx-dev libglx0 libglvnd0 libopengl-dev libopengl0
  libx11-6 libxcb1 libxau6 libxdmcp6 libbsd0 libmd0)
# The X runtime: Xvfb and what it links; xkbcomp (x11-xkb-utils: its other programs are not used) and
# the XKB data; GLVND's loaders (libEGL too, for NVIDIA's GLX); Mesa's GLX vendor, libglapi and
# swrast_dri with libLLVM-15 (whose Z3, x_a, goes with call A); GLFW and the X libraries it opens at
# run time (Xcursor, Xi, Xrandr, Xinerama, Xxf86vm, X11-xcb, Xrender); glxinfo (mesa-utils-bin).
# Not taken: xserver-common (Xvfb runs without its protocol.txt), Wayland, GLES, the Apt dependencies
# of x11-xkb-utils' other programs.
x_a=(libz3-4)
x_b=(
  xvfb libpixman-1-0 libxfont2 libfreetype6 libpng16-16 libbrotli1 libbz2-1.0 libfontenc1 libunwind8 libsystemd0 libcap2
  libgcrypt20 libgpg-error0 liblz4-1 liblzma5 libzstd1 libselinux1 libpcre2-8-0 libaudit1 libcap-ng0 libbsd0 libmd0
  libxau6 libxdmcp6 x11-xkb-utils libxkbfile1 xkb-data
  libgl1 libglx0 libglvnd0 libopengl0 libegl1 libglx-mesa0 libglapi-mesa libgl1-mesa-dri libllvm15 libffi8 libedit2 libtinfo6
  libxml2 libdrm2 libdrm-amdgpu1 libdrm-radeon1 libdrm-nouveau2 libdrm-intel1 libpciaccess0 libexpat1 libsensors5 libelf1
  libxcb-dri3-0 libxcb-dri2-0 libxcb-glx0 libxcb-present0 libxcb-sync1 libxcb-xfixes0 libxcb-randr0 libxcb-shm0
  libxshmfence1 libx11-xcb1 libxext6 libxfixes3 libxxf86vm1 libx11-6 libx11-data libxcb1
  libglfw3 libxcursor1 libxrender1 libxi6 libxrandr2 libxinerama1 mesa-utils-bin)
# libxml2's libicu72 is in .gpu/debs (unpacked into /opt/deps by call A).
emulate=0
[ "${1:-}" = --emulate ] && emulate=1

if [ ! -d .gpu/debs ]; then bash "$root/../shared/gpu/prepare"; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
download() {  # DIR PACKAGE...: Debian 12's current .debs of them, into DIR
  local dir=$1; shift
  mkdir -p "$dir"
  (cd "$dir" && apt-get download "$@" >"$tmp/apt.log" 2>&1) || { cat "$tmp/apt.log"; exit 1; }
}
ls .gpu/debs/libicu72_*.deb >/dev/null 2>&1 || download .gpu/debs libicu-dev libicu72
download "$tmp/dev" "${gui_dev[@]}"
download "$tmp/a" "${x_a[@]}"
download "$tmp/b" "${x_b[@]}"
added=0
rm -rf .gpu/gui-debs .gpu/x-debs .gpu-x
mkdir -p .gpu/gui-debs .gpu/x-debs .gpu-x
for f in "$tmp"/dev/*.deb; do
  p=$(dpkg-deb -f "$f" Package)
  if ! ls .gpu/debs/"${p}"_*.deb >/dev/null 2>&1; then cp "$f" .gpu/gui-debs/ && added=$((added + $(stat -c %s "$f"))); fi
done
cp "$tmp"/a/*.deb .gpu/x-debs/
cp "$tmp"/b/*.deb .gpu-x/
exclude="$(git rev-parse --git-common-dir)/info/exclude"
mkdir -p "$(dirname "$exclude")"
for p in /.gpu/ /.gpu-x/; do grep -qx "$p" "$exclude" 2>/dev/null || echo "$p" >>"$exclude"; done

# Every NEEDED library, followed to the end: in the kit (x: .gpu-x and .gpu/x-debs, unpacked into
# /opt/x; deps: .gpu/debs and .gpu/gui-debs, into /opt/deps), the base system, or the machine's PyTorch.
mkdir -p "$tmp/x" "$tmp/deps"
for f in .gpu/x-debs/*.deb .gpu-x/*.deb; do dpkg -x "$f" "$tmp/x"; done
for f in .gpu/debs/*.deb .gpu/gui-debs/*.deb; do dpkg -x "$f" "$tmp/deps"; done
libdirs=("$tmp/x/usr/lib/$arch" "$tmp/x/lib/$arch" "$tmp/deps/usr/lib/$arch" "$tmp/deps/lib/$arch")
base_re='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s|libz)\.so'
torch_re='^lib(torch|c10|gomp|cuda|cudart|cublas|cudnn|nv|caffe2|shm)'
needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
locate_so() {  # SONAME: the kit's file, else "base", "pytorch" or nothing
  local d
  [[ $1 =~ $base_re ]] && { echo base; return; }
  [[ $1 =~ $torch_re ]] && { echo pytorch; return; }
  for d in "${libdirs[@]}"; do [ -e "$d/$1" ] && { echo "$d/$1"; return; }; done
  return 0
}
tag() { case $1 in base | pytorch) echo "$1" ;; "$tmp"/x/*) echo x ;; "$tmp"/deps/*) echo deps ;; *) echo MISSING ;; esac; }
missing_all=0
check() {  # LABEL FILE: its NEEDED with where each comes from, then the whole closure's missing ones
  local label=$1 file=$2 so where direct=() queue=() missing=() n=0
  declare -A seen=()
  for so in $(needed "$file"); do direct+=("$so:$(tag "$(locate_so "$so")")"); queue+=("$so"); done
  while [ ${#queue[@]} -gt 0 ]; do
    so=${queue[0]}; queue=("${queue[@]:1}")
    [ -n "${seen[$so]:-}" ] && continue
    seen[$so]=1; n=$((n + 1))
    where=$(locate_so "$so")
    case $where in base | pytorch) ;; "") missing+=("$so") ;; *) for s in $(needed "$where"); do queue+=("$s"); done ;; esac
  done
  echo "$label: ${direct[*]:-(no NEEDED)}"
  echo "    closure $n libraries, missing: ${missing[*]:-none}"
  [ ${#missing[@]} = 0 ] || missing_all=1
}
echo "== every library the window needs on the GPU machine (x: /opt/x, deps: /opt/deps, base: glibc, libstdc++, libgcc_s, zlib)"
check Xvfb "$tmp/x/usr/bin/Xvfb"
check xkbcomp "$tmp/x/usr/bin/xkbcomp"
check swrast_dri.so "$tmp/x/usr/lib/$arch/dri/swrast_dri.so"
check libGLX_mesa.so.0 "$tmp/x/usr/lib/$arch/libGLX_mesa.so.0"
check libglfw.so.3 "$tmp/x/usr/lib/$arch/libglfw.so.3"
check glxinfo "$tmp/x/usr/bin/glxinfo.$arch"
for so in libGL.so.1 libGLX.so.0 libEGL.so.1 libXcursor.so.1 libXi.so.6 libXrandr.so.2 libXinerama.so.1 libXxf86vm.so.1 libX11-xcb.so.1 libXrender.so.1; do
  f=$(locate_so "$so")
  if [ -n "$f" ]; then check "$so (opened at run time)" "$f"; else echo "$so (opened at run time): MISSING"; missing_all=1; fi
done
bin=${SSAVIZ_WINDOW_BIN:-build/ssaviz}
if [ -x "$bin" ] && needed "$bin" | grep -q libglfw; then
  check "ssaviz ($bin)" "$bin"
else
  echo "ssaviz: no window build at $bin to check (SSAVIZ_WINDOW_BIN=...)"
fi

mb() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1e6}'; }
tree=$(git ls-files -z | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
gpu=$(du -sb .gpu | cut -f1)
gpux=$(du -sb .gpu-x | cut -f1)
echo "== sizes: the tree $(mb "$tree") MB; .gpu $(mb "$gpu") MB (.gpu/gui-debs $(mb "$added") MB, .gpu/x-debs $(mb "$(du -sb .gpu/x-debs | cut -f1)") MB); .gpu-x $(mb "$gpux") MB"
xdebs=$(du -sb .gpu/x-debs | cut -f1)
echo "   call A (carry .gpu): $(mb $((tree + gpu))) MB; call B (carry .gpu-x .gpu/x-debs): $(mb $((tree + gpux + xdebs))) MB (at most 64 MiB = 67.1 MB each)"
[ $((tree + gpux + xdebs)) -lt 67100000 ] && [ $((tree + gpu)) -lt 67100000 ] || { echo "a call is over 64 MiB"; exit 1; }
[ $missing_all = 0 ] || { echo "the kit misses libraries (above)"; exit 1; }
[ $emulate = 1 ] || exit 0

# --- The emulation: a private mount namespace per pass, in which the packages are hidden. ---
[ "$(id -u)" = 0 ] || { echo "--emulate needs root (unshare -m)"; exit 1; }
bin=$(readlink -f "$bin")
emu=/tmp/gpu-window-emu
rm -rf "$emu" && mkdir -p "$emu"
[ "$(stat -c %d "$emu")" = "$(stat -c %d /usr)" ] || { echo "--emulate hard-links /usr's folders into $emu: needs one filesystem"; exit 1; }
packages_loaded_by() {  # FILE...: the packages of the libraries they load
  for f in "$@"; do ldd "$f"; done | awk '/=>/ {print $3}' | sort -u | sed 's#^/lib/#/usr/lib/#' |
    { xargs -r dpkg -S 2>/dev/null || true; } | cut -d: -f1 | sort -u | tr '\n' ' '
}
installed() { dpkg-query -W -f '${Status} ${Package}\n' "$@" 2>/dev/null | awk '$3 == "installed" {print $4}'; }
closure_of() {  # PACKAGE...: them and what they depend on, as installed here
  installed $(apt-cache depends --recurse --installed --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
    --no-enhances "$@" 2>/dev/null | grep -v -e '^ ' -e '^<' | sort -u)
}
# Not hidden: what any Ubuntu has (glibc, libstdc++, libgcc_s, zlib) and what its bash, coreutils, grep
# and dpkg run on (the machine unpacks the kit with dpkg).
base="libc6 libstdc++6 libgcc-s1 gcc-12-base zlib1g libtinfo6 libselinux1 libpcre2-8-0 libmd0 liblzma5 libzstd1 libbz2-1.0 libacl1 libattr1 libgmp10 libcrypt1"
kitpk=$(for f in .gpu/x-debs/*.deb .gpu-x/*.deb "$tmp"/dev/*.deb; do dpkg-deb -f "$f" Package; done | sort -u)
pass_files() {  # NAME PACKAGE...: the files those packages installed, less the base's
  local name=$1; shift
  comm -23 <(closure_of "$@" | sort -u) <(tr ' ' '\n' <<<"$base $keep" | sort -u) >"$emu/$name.packages"
  xargs -a "$emu/$name.packages" dpkg -L 2>/dev/null | sed -E 's#^/(lib|bin|sbin)/#/usr/\1/#' | sort -u >"$emu/$name.files"
  echo "$name: hides $(wc -l <"$emu/$name.packages") packages, $(wc -l <"$emu/$name.files") paths"
}
roots=(/usr/lib/$arch /usr/bin /usr/include /usr/share/X11 /usr/share/pkgconfig /usr/lib/xorg)
run_hidden() {  # NAME COMMAND: COMMAND in a namespace where NAME.files are gone, /opt/deps is .gpu/debs and .gpu/gui-debs unpacked
  local name=$1 cmd=$2 r
  for r in "${roots[@]}"; do
    mkdir -p "$emu/$name$(dirname "$r")"
    cp -al "$r" "$emu/$name$r"
  done
  while read -r f; do
    for r in "${roots[@]}"; do [[ $f == "$r"/* ]] && { rm -f "$emu/$name$f" 2>/dev/null || true; }; done
  done <"$emu/$name.files"
  rm -rf "$emu/$name/usr/lib/$arch/dri" "$emu/$name/usr/share/X11/xkb"
  unshare -m bash -c "
    set -e
    for r in ${roots[*]}; do mount --bind $emu/$name\$r \$r; done
    ldconfig -X -C $emu/$name.ld.so.cache && mount --bind $emu/$name.ld.so.cache /etc/ld.so.cache
    mount -t tmpfs tmpfs /opt && mkdir -p /opt/deps && mount --bind $tmp/deps /opt/deps
    set +e
    $cmd"
}

echo "== (a) call A's configure of the window (GUI=ON) against /opt/deps, and a GNU ld link of ImGui + GLFW + OpenGL"
# The machine has its own CMake, ninja, compilers and linkers: what they load stays.
keep=$(packages_loaded_by $(command -v cmake ninja pkgconf ld.bfd ld.lld as) "$(g++ -print-prog-name=cc1plus)")
pass_files configure "${gui_dev[@]}" libgl1-mesa-dev libglvnd-dev libglvnd-core-dev libegl-dev libgles-dev libx11-dev libglu1-mesa-dev libglut-dev
mkdir -p "$emu/link"
cat >"$emu/link/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.18)
project(link CXX)
find_package(PkgConfig REQUIRED)
pkg_check_modules(IMGUI REQUIRED IMPORTED_TARGET imgui)
find_package(glfw3 3.3 REQUIRED)
set(OpenGL_GL_PREFERENCE GLVND)
find_package(OpenGL REQUIRED)
add_executable(link main.cpp)
target_link_libraries(link PRIVATE PkgConfig::IMGUI glfw OpenGL::GL)
target_link_options(link PRIVATE -fuse-ld=bfd)
EOF
cat >"$emu/link/main.cpp" <<'EOF'
#include <GL/gl.h>
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>
int main(int argc, char**) {
    if (argc < 9) return 0;  // links, never runs
    glfwInit();
    GLFWwindow* w = glfwCreateWindow(64, 64, "link", nullptr, nullptr);
    ImGui::CreateContext();
    ImGui_ImplGlfw_InitForOpenGL(w, true);
    ImGui_ImplOpenGL3_Init("#version 130");
    GLuint t = 0;
    glGenTextures(1, &t);
    return static_cast<int>(t);
}
EOF
pc="export PKG_CONFIG_PATH=/opt/deps/usr/lib/$arch/pkgconfig:/opt/deps/usr/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=/opt/deps LD_LIBRARY_PATH=/opt/deps/usr/lib/$arch"
run_hidden configure "$pc
  ls /usr/include/GLFW /usr/include/imgui /usr/lib/$arch/libglfw.so.3 /usr/lib/$arch/libX11.so.6 2>&1 | sed 's/^/  hidden: /'
  cmake -S $root -B $emu/build-gui -G Ninja -DCMAKE_BUILD_TYPE=Release -DSSAVIZ_GUI=ON -DSSAVIZ_TESTS=OFF \
    -DCMAKE_PREFIX_PATH=/opt/deps/usr -DPKG_CONFIG_EXECUTABLE=\$(command -v pkg-config) >$emu/configure.log 2>&1
  echo \"  configure rc \$?\"; grep -E 'CMake Error|Could NOT|not found' $emu/configure.log | head -n 5
  grep -E '^(glfw3_DIR|OPENGL_opengl_LIBRARY|OPENGL_glx_LIBRARY|OPENGL_INCLUDE_DIR|IMGUI_INCLUDEDIR|pkgcfg_lib_IMGUI_imgui):' $emu/build-gui/CMakeCache.txt | sed 's/^/  /'
  cmake -S $emu/link -B $emu/link/build -DCMAKE_PREFIX_PATH=/opt/deps/usr >$emu/link.log 2>&1 && cmake --build $emu/link/build >>$emu/link.log 2>&1
  echo \"  GNU ld link rc \$? (log $emu/link.log)\"; grep -E 'error|warning' $emu/link.log | head -n 5"

echo "== (b) Xvfb and glxinfo (bench/gpu-window.sh's stage x) with every package of the kit hidden"
keep=""
pass_files strict $kitpk
run_hidden strict "cd $root && unset SSAVIZ_WINDOW_BIN && ls /usr/bin/Xvfb /usr/lib/$arch/libLLVM-15.so.1 /usr/lib/$arch/libexpat.so.1 2>&1 | sed 's/^/  hidden: /'
  SSAVIZ_WINDOW_STAGES=x bash bench/gpu-window.sh $emu/out-x 2>&1 | sed 's/^/  /'"

echo "== (c) the whole of bench/gpu-window.sh on the CPU with $bin (its Debian LibTorch's own packages stay)"
keep=$(packages_loaded_by $(ldd "$bin" | awk '/libtorch|libc10/ {print $3}'))
pass_files window $kitpk
model=${SSAVIZ_WINDOW_MODEL:-$emu/model}
[ -n "${SSAVIZ_WINDOW_MODEL:-}" ] || "$bin" init-random --out "$model" --seed 1 --tokenizer assets/tokenizers/gpt2 \
  --layers 2 --heads 4 --embd 64 --positions 2048 >/dev/null
run_hidden window "cd $root && ls /usr/bin/Xvfb /usr/lib/$arch/libglfw.so.3 /usr/lib/$arch/libXcursor.so.1 2>&1 | sed 's/^/  hidden: /'
  SSAVIZ_WINDOW_DEVICE=cpu SSAVIZ_WINDOW_BIN=$bin SSAVIZ_WINDOW_MODEL=$model SSAVIZ_WINDOW_TOKENS=${SSAVIZ_WINDOW_TOKENS:-1000} \
    bash bench/gpu-window.sh $emu/out 2>&1 | sed 's/^/  /'"
ls -l "$emu"/out*/
