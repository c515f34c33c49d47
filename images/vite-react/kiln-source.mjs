// kiln's source-location plugin for the dev server (issue 26): every intrinsic JSX element the
// dev server serves gets `data-kiln-source="src/App.jsx:14:7"` (path relative to the project,
// 1-based line, 1-based column of its `<`) and `data-kiln-component="App"` (the function
// component around it, when there is one). The preview's select mode reads them.
//
// Carried by the image, outside the workspace: only the dev server loads it (kiln-vite.mjs), so
// the project's files, versions, zips and `npm run build` output never contain the attributes.
// The JSX is parsed by the project's own Babel (installed with @vitejs/plugin-react) and the
// attributes are added to the syntax tree, with a source map, so stack traces stay right.
// Components (`<TodoList>`) are left alone: a prop they do not expect could reach their DOM.
import { createRequire } from 'node:module'
import path from 'node:path'

const JSX_FILE = /\.[jt]sx$/
const SOURCE = 'data-kiln-source'
const COMPONENT = 'data-kiln-component'

function componentName(nodePath) {
  for (let at = nodePath.parentPath; at; at = at.parentPath) {
    const node = at.node
    let name = null
    if (at.isFunctionDeclaration() || at.isClassDeclaration()) name = node.id && node.id.name
    else if (at.isArrowFunctionExpression() || at.isFunctionExpression()) {
      const owner = at.parentPath
      if (owner.isVariableDeclarator() && owner.node.id.type === 'Identifier') name = owner.node.id.name
    }
    if (name && /^[A-Z]/.test(name)) return name
  }
  return null
}

function tagger(t, relative) {
  return {
    name: 'kiln-source',
    visitor: {
      JSXOpeningElement(nodePath) {
        const { node } = nodePath
        if (node.name.type !== 'JSXIdentifier' || !/^[a-z]/.test(node.name.name)) return
        if (!node.loc) return
        if (node.attributes.some((a) => a.type === 'JSXAttribute' && a.name.name === SOURCE)) return
        const where = `${relative}:${node.loc.start.line}:${node.loc.start.column + 1}`
        const added = [t.jsxAttribute(t.jsxIdentifier(SOURCE), t.stringLiteral(where))]
        const component = componentName(nodePath)
        if (component) added.push(t.jsxAttribute(t.jsxIdentifier(COMPONENT), t.stringLiteral(component)))
        node.attributes.push(...added)
      },
    },
  }
}

/** The Vite plugin; `workspace` is the project's folder (its own Babel is loaded from there). */
export function kilnSource({ workspace }) {
  const babel = createRequire(path.join(workspace, 'package.json'))('@babel/core')
  let root = workspace
  const plugin = {
    name: 'kiln-source',
    enforce: 'pre',
    apply: 'serve',
    // First of all transforms, so that it reads the file as written: @vitejs/plugin-react's own
    // pre transform adds lines (the refresh preamble) that would shift every location. Vite
    // creates its plugin container from this array after the configResolved hooks.
    configResolved(config) {
      root = config.root
      const plugins = config.plugins
      plugins.splice(plugins.indexOf(plugin), 1)
      plugins.unshift(plugin)
    },
    async transform(code, id) {
      const file = id.split('?')[0]
      if (!JSX_FILE.test(file) || file.includes('/node_modules/') || !file.startsWith(root + '/')) return null
      const relative = path.relative(root, file)
      const plugins = ['jsx']
      if (file.endsWith('.tsx')) plugins.push('typescript')
      const result = await babel.transformAsync(code, {
        filename: file,
        babelrc: false,
        configFile: false,
        sourceMaps: true,
        retainLines: true,
        parserOpts: { plugins, sourceType: 'module' },
        plugins: [tagger(babel.types, relative)],
      })
      return result ? { code: result.code, map: result.map } : null
    },
  }
  return plugin
}
