// simbodyx's trajectory viewer: builds a three.js scene from the JSON in
// #simbodyx-scene (written by simbodyx.viz.page) and plays its body poses.
// three.js and its OrbitControls are embedded in the page as text and loaded
// from blob URLs, so the page needs no server and no network.
const text = (id) => document.getElementById(id).textContent;
const threeUrl = URL.createObjectURL(new Blob([text("three-src")], { type: "text/javascript" }));
const orbitSrc = text("orbit-src").replace(/from\s*['"]three['"]/g, `from '${threeUrl}'`);
const THREE = await import(threeUrl);
const { OrbitControls } = await import(URL.createObjectURL(new Blob([orbitSrc], { type: "text/javascript" })));

const data = JSON.parse(text("simbodyx-scene"));
const decode = (b64, Type) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  return new Type(bytes.buffer);
};
const poses = decode(data.poses, Float32Array); // (instances, frames, bodies, 7)
const [nInstances, nFrames, nBodies] = [data.instances, data.times.length, data.bodies];
const up = new THREE.Vector3(...data.up);

const root = document.getElementById("simbodyx-root");
const renderer = new THREE.WebGLRenderer({ antialias: true, preserveDrawingBuffer: true });
renderer.setPixelRatio(window.devicePixelRatio || 1);
renderer.setSize(root.clientWidth, root.clientHeight);
renderer.shadowMap.enabled = true;
root.prepend(renderer.domElement);

const scene = new THREE.Scene();
scene.background = new THREE.Color(data.background);
scene.add(new THREE.HemisphereLight(0xffffff, 0x667080, 2.2));
const sun = new THREE.DirectionalLight(0xffffff, 1.6);
sun.castShadow = true;
sun.shadow.mapSize.set(2048, 2048);
scene.add(sun, sun.target);

// A plane's grid: one cell of data.grid metres, repeated (the material's
// colour tints it).
const gridTexture = (() => {
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = 128;
  const context = canvas.getContext("2d");
  context.fillStyle = "#ffffff";
  context.fillRect(0, 0, 128, 128);
  context.strokeStyle = "#9aa0aa";
  context.lineWidth = 3;
  context.strokeRect(0, 0, 128, 128);
  const texture = new THREE.CanvasTexture(canvas);
  texture.wrapS = texture.wrapT = THREE.RepeatWrapping;
  texture.anisotropy = renderer.capabilities.getMaxAnisotropy();
  texture.colorSpace = THREE.SRGBColorSpace;
  return texture;
})();

// A shape's geometry in its own frame S (three.js's cylinders and capsules
// run along y; simbodyx's along z).
function geometryOf(shape) {
  const s = shape.size;
  switch (shape.kind) {
    case "box": return new THREE.BoxGeometry(2 * s[0], 2 * s[1], 2 * s[2]);
    case "sphere": return new THREE.SphereGeometry(s[0], 32, 16);
    case "ellipsoid": return new THREE.SphereGeometry(1, 32, 16).scale(s[0], s[1], s[2]);
    case "cylinder": return new THREE.CylinderGeometry(s[0], s[0], 2 * s[1], 32).rotateX(Math.PI / 2);
    case "capsule": return new THREE.CapsuleGeometry(s[0], 2 * s[1], 8, 24).rotateX(Math.PI / 2);
    case "plane": {
      const w = s[0] > 0 ? 2 * s[0] : data.extent, h = s[1] > 0 ? 2 * s[1] : data.extent;
      return new THREE.PlaneGeometry(w, h);
    }
    case "mesh": {
      const g = new THREE.BufferGeometry();
      g.setAttribute("position", new THREE.BufferAttribute(decode(shape.vertices, Float32Array), 3));
      g.setIndex(new THREE.BufferAttribute(decode(shape.faces, Uint32Array), 1));
      g.computeVertexNormals();
      return g;
    }
  }
  throw new Error(`simbodyx viewer: unknown shape kind ${shape.kind}`);
}

function meshOf(shape, opacity) {
  const [r, g, b, a] = shape.rgba;
  const alpha = a * opacity;
  const material = new THREE.MeshStandardMaterial({
    color: new THREE.Color(r, g, b), roughness: 0.75, metalness: 0.05,
    transparent: alpha < 1, opacity: alpha, side: shape.kind === "plane" ? THREE.DoubleSide : THREE.FrontSide,
  });
  const mesh = new THREE.Mesh(geometryOf(shape), material);
  mesh.name = shape.name;
  mesh.castShadow = shape.kind !== "plane";
  mesh.receiveShadow = true;
  mesh.userData.kind = shape.kind;
  mesh.matrixAutoUpdate = false;
  mesh.matrix.fromArray(shape.X_BS).transpose(); // row-major 4x4 in, column-major in three.js
  if (shape.kind === "plane") {
    const { width, height } = mesh.geometry.parameters;
    material.map = gridTexture.clone();
    material.map.repeat.set(width / data.grid, height / data.grid);
    material.map.needsUpdate = true;
  }
  return mesh;
}

// A floor once; every other shape once per instance, in a Group per body
// whose local pose is X_GB, under the instance's offset.
const planes = new THREE.Group();
scene.add(planes);
const bodies = [];
for (let i = 0; i < nInstances; i++) {
  const instance = new THREE.Group();
  instance.position.fromArray(data.offsets[i]);
  scene.add(instance);
  const groups = [];
  for (let b = 0; b < nBodies; b++) {
    const group = new THREE.Group();
    group.name = data.names[b];
    instance.add(group);
    groups.push(group);
  }
  for (const shape of data.shapes) {
    if (shape.shared) {
      if (i === 0) planes.add(meshOf(shape, 1));
      continue;
    }
    groups[shape.body].add(meshOf(shape, shape.body === 0 ? 1 : data.opacity));
  }
  for (const [b, p] of data.stations) {
    const dot = new THREE.Mesh(new THREE.SphereGeometry(data.marker, 12, 8),
      new THREE.MeshStandardMaterial({ color: 0xd04020 }));
    dot.position.fromArray(p);
    dot.userData.kind = "station";
    groups[b].add(dot);
  }
  if (data.frames) for (const group of groups) group.add(new THREE.AxesHelper(data.triad));
  bodies.push(groups);
}

// Contact points and their forces (in metres already): a dot and an arrow
// per candidate point, shown where the force is not zero.
const contacts = [];
if (data.contacts && data.contacts.count > 0) {
  const points = decode(data.contacts.points, Float32Array), forces = decode(data.contacts.forces, Float32Array);
  const dotGeometry = new THREE.SphereGeometry(data.contacts.radius, 12, 8);
  const dotMaterial = new THREE.MeshBasicMaterial({ color: 0xe03020, depthTest: false });
  for (let i = 0; i < nInstances; i++) {
    const instance = bodies[i][0].parent, marks = [];
    for (let c = 0; c < data.contacts.count; c++) {
      const dot = new THREE.Mesh(dotGeometry, dotMaterial);
      dot.userData.kind = "contact";
      const arrow = new THREE.ArrowHelper(new THREE.Vector3(0, 0, 1), new THREE.Vector3(), 1, 0xe03020);
      for (const part of [arrow.line, arrow.cone]) part.material.depthTest = false; // seen through the bodies
      arrow.cone.userData.kind = "arrow";
      dot.renderOrder = arrow.renderOrder = arrow.line.renderOrder = arrow.cone.renderOrder = 10;
      instance.add(dot, arrow);
      marks.push([dot, arrow]);
    }
    contacts.push(marks);
  }
  contacts.update = (k) => {
    const n = data.contacts.count, direction = new THREE.Vector3();
    for (let i = 0; i < nInstances; i++) {
      for (let c = 0; c < n; c++) {
        const o = ((i * nFrames + k) * n + c) * 3, [dot, arrow] = contacts[i][c];
        direction.set(forces[o], forces[o + 1], forces[o + 2]);
        const length = direction.length();
        dot.visible = arrow.visible = length > 0;
        if (length > 0) {
          dot.position.set(points[o], points[o + 1], points[o + 2]);
          arrow.position.copy(dot.position);
          arrow.setDirection(direction.divideScalar(length));
          arrow.setLength(length, Math.min(0.3 * length, 4 * data.contacts.radius), Math.min(0.2 * length,
            2.5 * data.contacts.radius));
        }
      }
    }
  };
}

let frame = 0;
function setFrame(k) {
  frame = Math.max(0, Math.min(nFrames - 1, k));
  for (let i = 0; i < nInstances; i++) {
    for (let b = 0; b < nBodies; b++) {
      const o = ((i * nFrames + frame) * nBodies + b) * 7;
      bodies[i][b].position.set(poses[o], poses[o + 1], poses[o + 2]);
      bodies[i][b].quaternion.set(poses[o + 3], poses[o + 4], poses[o + 5], poses[o + 6]);
    }
  }
  if (contacts.update) contacts.update(frame);
  slider.value = frame;
  clock.textContent = `t = ${data.times[frame].toFixed(3)} s`;
  scene.updateMatrixWorld(true);
}

// Camera: looking at the first frame's moving shapes from a raised diagonal.
const camera = new THREE.PerspectiveCamera(45, root.clientWidth / root.clientHeight, 0.01, 100);
camera.up.copy(up);
const controls = new OrbitControls(camera, renderer.domElement);
function frameCamera() {
  const box = new THREE.Box3();
  for (const groups of bodies) for (const g of groups) g.traverse((o) => {
    if (o.isMesh && o.userData.kind !== "plane") box.expandByObject(o);
  });
  const point = new THREE.Vector3(), around = new THREE.Box3(), span = new THREE.Vector3();
  for (let i = 0; i < nInstances; i++) { // and every body's drawing over the whole trajectory
    for (let k = 0; k < nFrames; k++) {
      for (let b = 1; b < nBodies; b++) {
        const o = ((i * nFrames + k) * nBodies + b) * 7;
        point.set(poses[o], poses[o + 1], poses[o + 2]).add(bodies[i][0].parent.position);
        box.union(around.setFromCenterAndSize(point, span.setScalar(2 * data.reach[b])));
      }
    }
  }
  const center = box.isEmpty() ? new THREE.Vector3() : box.getCenter(new THREE.Vector3());
  const radius = box.isEmpty() ? 1 : Math.max(box.getSize(new THREE.Vector3()).length() / 2, 0.05);
  const side = Math.abs(up.z) > 0.9 ? new THREE.Vector3(1, -1.6, 0) : new THREE.Vector3(1.6, 0, 1);
  const direction = side.addScaledVector(up, 0.8).normalize();
  camera.position.copy(center).addScaledVector(direction, 2.6 * radius);
  camera.near = 0.01 * radius;
  camera.far = 10 * radius + 2 * data.extent;
  camera.updateProjectionMatrix();
  controls.target.copy(center);
  sun.position.copy(center).addScaledVector(up, 5 * radius).addScaledVector(direction, 2 * radius);
  sun.target.position.copy(center);
  const reach = 2 * radius;
  Object.assign(sun.shadow.camera, { left: -reach, right: reach, top: reach, bottom: -reach, near: 0.1 * radius,
    far: 12 * radius });
  sun.shadow.camera.updateProjectionMatrix();
  controls.update();
}

// Controls: play/pause, a time slider, the playback speed.
const bar = document.getElementById("simbodyx-bar");
const play = bar.querySelector("button");
const slider = bar.querySelector("input");
const speed = bar.querySelector("select");
const clock = bar.querySelector("span");
slider.max = nFrames - 1;
bar.style.display = nFrames > 1 ? "flex" : "none";
let playing = nFrames > 1 && data.autoplay, simTime = 0, last = null;
play.textContent = playing ? "Pause" : "Play";
play.onclick = () => {
  playing = !playing;
  play.textContent = playing ? "Pause" : "Play";
  simTime = data.times[frame] - data.times[0];
  last = null;
};
slider.oninput = () => { playing = false; play.textContent = "Play"; setFrame(Number(slider.value)); };

function tick(now) {
  if (playing) {
    if (last !== null) simTime += ((now - last) / 1000) * Number(speed.value);
    const t0 = data.times[0], span = data.times[nFrames - 1] - t0;
    if (simTime > span) simTime = 0;
    let k = frame;
    if (data.times[k] - t0 > simTime) k = 0;
    while (k + 1 < nFrames && data.times[k + 1] - t0 <= simTime) k++;
    if (k !== frame) setFrame(k);
  }
  last = now;
  controls.update();
  renderer.render(scene, camera);
  requestAnimationFrame(tick);
}

window.addEventListener("resize", () => {
  camera.aspect = root.clientWidth / root.clientHeight;
  camera.updateProjectionMatrix();
  renderer.setSize(root.clientWidth, root.clientHeight);
});

setFrame(0);
frameCamera();
renderer.render(scene, camera);
requestAnimationFrame(tick);
// For scripts driving the page (simbodyx.viz.video, the tests).
window.simbodyx = {
  THREE, scene, camera, renderer, bodies, contacts, frameCount: nFrames,
  setFrame(k) { playing = false; setFrame(k); renderer.render(scene, camera); },
  ready: true,
};
